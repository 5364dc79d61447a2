"""The churn feature build as an Airflow task array, then the fit.

`build_shard.expand(k=...)` (dynamic task mapping, Airflow >= 2.3) makes N mapped task
instances; each runs `mm fit churn --shard K/N` and commits its part of the Delta tables. Airflow
retries a failed instance on its own; a retried shard replaces its partition. The fit runs when
every mapped instance has succeeded, and refuses (naming them) if shards are missing.
Coordination is the Delta log alone: no shared state between the tasks.
"""

import pendulum
from airflow.decorators import dag, task
from airflow.operators.bash import BashOperator

SHARDS = 8
OPTIONS = "--mode tdm-6v6 --horizon 8h"
ENV = {
    "MM_LAKE": "s3://matchmaking/lake",
    "MM_TABLES": "s3://matchmaking/tables/churn",
    "MM_LOG_FORMAT": "json",
}


@dag(schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False)
def mm_churn():
    @task.bash(env=ENV, append_env=True, retries=3)
    def build_shard(k: int) -> str:
        return f"mm fit churn {OPTIONS} --out /tmp/out --shard {k}/{SHARDS} --json"

    fit = BashOperator(
        task_id="fit",
        env=ENV,
        append_env=True,
        bash_command=f"mm fit churn {OPTIONS} --out /data/churn/{{{{ ds }}}} --json",
    )
    build_shard.expand(k=list(range(SHARDS))) >> fit


mm_churn()
