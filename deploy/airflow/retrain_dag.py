"""The nightly retrain as an Airflow DAG: `mm retrain` on the lake in a bucket, publishing to the
model store there, where `mm serve` reads it.

The working directory (MM_WORK) must survive a retried task: the run resumes after its last
finished stage, and its lock keeps two runs from overlapping (max_active_runs=1 as well). The
task's stdout is the run's JSON summary (`--json`); the stage logs go to stderr as JSON lines.
"""

import pendulum
from airflow.decorators import dag
from airflow.operators.bash import BashOperator

ENV = {
    "MM_LAKE": "s3://matchmaking/lake",
    "MM_MODELS": "s3://matchmaking/models",
    "MM_WORK": "/data/mm-retrain",
    "MM_LOG_FORMAT": "json",
}


@dag(
    schedule="30 3 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
)
def mm_retrain():
    BashOperator(
        task_id="retrain",
        env=ENV,
        append_env=True,
        retries=3,
        bash_command="mm retrain --holdout-days=1 --margin=0.002 --json",
    )


mm_retrain()
