"""Alarms and a dashboard for the functions, the API, recall's search index and the purge
pipeline."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_stepfunctions as sfn

from constructs import Construct
from infra import settings

if TYPE_CHECKING:
    from infra.constructs.search import Search

ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
BELOW = cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.Function],
        api: apigw.RestApi,
        key: kms.IKey,
        search: Search | None = None,
        purge: sfn.StateMachine | None = None,
        alarm_email: str | None = None,
        alarm_topic_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self, "Alarms", master_key=key, enforce_ssl=True, display_name="memvault alarms"
        )
        if alarm_email:
            # SNS mails a confirmation first: nothing is delivered until it is confirmed.
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        # Every alarm publishes to the stack's topic and, when given, to an existing one
        # (an operations team's; its policy must let CloudWatch publish).
        self.topics: list[sns.ITopic] = [self.topic]
        if alarm_topic_arn:
            self.topics.append(sns.Topic.from_topic_arn(self, "ExistingAlarms", alarm_topic_arn))
        # CloudWatch publishes alarms to the encrypted topic only if the key lets it.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsToTheEncryptedTopic",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
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
        )
        if search is not None:
            dashboard.add_widgets(*self._search(search))
        if purge is not None:
            dashboard.add_widgets(self._purge(purge))
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms))
        )

    def _search(self, search: Search) -> list[cloudwatch.IWidget]:
        """The indexer's lag and give-ups, and the domain's health."""
        minute = Duration.minutes(1)
        indexer, domain = search.indexer, search.domain
        iterator_age = indexer.metric("IteratorAge", statistic="Maximum", period=minute)
        # Lag that lasts: recall then proposes from an index minutes behind the table.
        self._alarm(
            "indexer-iterator-age",
            iterator_age,
            settings.ITERATOR_AGE_THRESHOLD.to_milliseconds(),
            periods=5,
        )
        dead_letters = search.dlq.metric_approximate_number_of_messages_visible(
            statistic="Maximum", period=Duration.minutes(5)
        )
        # Any batch given up on: its memories are missing from (or stale in) the index.
        self._alarm("indexer-dead-letters", dead_letters, 1)
        red = domain.metric_cluster_status_red(period=minute)
        self._alarm("search-cluster-red", red, 1)
        self._alarm(
            "search-writes-blocked", domain.metric_cluster_index_writes_blocked(period=minute), 1
        )
        free_storage = domain.metric_free_storage_space(period=Duration.minutes(5))
        self._alarm("search-free-storage", free_storage, settings.SEARCH_FREE_STORAGE_MIB, BELOW)
        jvm = domain.metric_jvm_memory_pressure(period=Duration.minutes(5))
        self._alarm("search-jvm-pressure", jvm, settings.SEARCH_JVM_PRESSURE_PERCENT, periods=3)
        return [
            cloudwatch.GraphWidget(
                title="Indexer: batches, errors, throttles",
                left=[indexer.metric_invocations(), indexer.metric_errors()],
                right=[indexer.metric_throttles()],
            ),
            cloudwatch.GraphWidget(
                title="Indexer: stream lag (ms) and dead letters",
                left=[iterator_age],
                right=[dead_letters],
            ),
            cloudwatch.GraphWidget(
                title="Search: cluster red, writes blocked, JVM pressure",
                left=[red, domain.metric_cluster_index_writes_blocked()],
                right=[jvm],
            ),
            cloudwatch.GraphWidget(
                title="Search: free storage (MiB), latency (ms)",
                left=[free_storage],
                right=[domain.metric_search_latency(), domain.metric_indexing_latency()],
            ),
        ]

    def _purge(self, purge: sfn.StateMachine) -> cloudwatch.IWidget:
        """Any purge that failed (after its steps' retries) or ran out of time: a
        deletion the API reported accepted whose copies are not all gone."""
        period = Duration.minutes(5)
        failed = purge.metric_failed(period=period, statistic="Sum")
        timed_out = purge.metric_timed_out(period=period, statistic="Sum")
        self._alarm("purge-failed", failed, settings.PURGE_FAILED_THRESHOLD)
        self._alarm("purge-timed-out", timed_out, settings.PURGE_FAILED_THRESHOLD)
        # A deletion whose relaunches ran out (the sweeper's bounded attempts): it needs
        # an operator. Emitted by whichever function launched it, with Powertools' service
        # dimension (the api, direct and sweeper functions share the service name).
        abandoned = cloudwatch.Metric(
            namespace=settings.APP,
            metric_name="PurgeAbandoned",
            dimensions_map={"service": settings.APP},
            period=period,
            statistic="Sum",
        )
        self._alarm("purge-abandoned", abandoned, settings.PURGE_FAILED_THRESHOLD)
        return cloudwatch.GraphWidget(
            title="Purge pipeline: executions started, succeeded, failed, timed out",
            left=[
                purge.metric_started(period=period, statistic="Sum"),
                purge.metric_succeeded(period=period, statistic="Sum"),
            ],
            right=[failed, timed_out],
        )

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.Metric,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator = ABOVE,
        *,
        periods: int = 1,
    ) -> None:
        alarm = metric.create_alarm(
            self,
            f"Alarm-{name}",
            alarm_description=f"memvault {name}",
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=comparison,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(*(actions.SnsAction(topic) for topic in self.topics))
        self.alarms.append(alarm)
