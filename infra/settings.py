"""Names and limits of the deployment, in one place."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

APP = "memvault"

PYTHON_RUNTIME = lambda_.Runtime.PYTHON_3_14
PYTHON_VERSION = "3.14"  # the wheels the layer is built from
ARCHITECTURE = lambda_.Architecture.ARM_64
WHEEL_PLATFORM = "manylinux2014_aarch64"

LOG_RETENTION = logs.RetentionDays.ONE_MONTH
ACCESS_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS

#: Per function: memory (MB), timeout, and the concurrency it may take from the account.
FUNCTIONS = {
    "api": {"memory": 1024, "timeout": Duration.seconds(15), "reserved": 100},
    "authorizer": {"memory": 512, "timeout": Duration.seconds(5), "reserved": 50},
    "direct": {"memory": 1024, "timeout": Duration.seconds(15), "reserved": 50},
    "sweeper": {"memory": 512, "timeout": Duration.minutes(5), "reserved": 1},
}
#: How often staged uploads never committed are swept.
SWEEP_SCHEDULE = Duration.hours(1)

#: API Gateway stage throttling (all tenants together) and the default per-tenant plan.
STAGE_RATE_LIMIT = 500
STAGE_BURST_LIMIT = 1000
TENANT_RATE_LIMIT = 50
TENANT_BURST_LIMIT = 100
TENANT_MONTHLY_QUOTA = 5_000_000
AUTHORIZER_CACHE = Duration.minutes(5)

#: Alarms.
ERROR_ALARM_THRESHOLD = 5  # function errors in 5 minutes
THROTTLE_ALARM_THRESHOLD = 1
API_5XX_THRESHOLD = 5

#: The session tag that scopes a tenant's credentials, and the key prefix it allows.
TENANT_TAG = "tenant_id"
