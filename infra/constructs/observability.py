"""Alarms and a dashboard for the functions and the API."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns

from constructs import Construct
from infra import settings


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.Function],
        api: apigw.RestApi,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self, "Alarms", master_key=key, enforce_ssl=True, display_name="memvault alarms"
        )
        self.alarms: list[cloudwatch.Alarm] = []
        five_minutes = Duration.minutes(5)
        for name, fn in functions.items():
            self._alarm(
                f"{name}-errors",
                fn.metric_errors(period=five_minutes),
                settings.ERROR_ALARM_THRESHOLD,
            )
            self._alarm(
                f"{name}-throttles",
                fn.metric_throttles(period=five_minutes),
                settings.THROTTLE_ALARM_THRESHOLD,
            )
        self._alarm(
            "api-5xx", api.metric_server_error(period=five_minutes), settings.API_5XX_THRESHOLD
        )
        dashboard = cloudwatch.Dashboard(self, "Dashboard")
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API requests and errors",
                left=[api.metric_count(), api.metric_client_error(), api.metric_server_error()],
            ),
            cloudwatch.GraphWidget(title="API latency", left=[api.metric_latency()]),
            cloudwatch.GraphWidget(
                title="Function errors and throttles",
                left=[
                    m
                    for fn in functions.values()
                    for m in (fn.metric_errors(), fn.metric_throttles())
                ],
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms)),
        )

    def _alarm(self, name: str, metric: cloudwatch.Metric, threshold: int) -> None:
        alarm = metric.create_alarm(
            self,
            f"Alarm-{name}",
            alarm_description=f"memvault {name}",
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)
