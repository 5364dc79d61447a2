# Sourced by the churn bench scripts (churn_fit_vs.sh, churn_fit_ab.sh): times read from an
# `mm` run's log.

# The seconds since the epoch of the first log line matching $2 in the log $1.
stamp() {
  date -u -d "$(grep -m1 "$2" "$1" | cut -c1-27)" +%s.%N
}
