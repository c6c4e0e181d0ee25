#!/bin/sh
# Run examples/kubernetes-indexed-job.yaml with kubectl (its current context and namespace):
# the measuring Indexed Job, a wait that ends when it completes OR fails, then the merge Job,
# whose log is the answer.
#
#   examples/kubernetes-run.sh [MANIFEST]
#
# `kubectl wait --for=condition=complete` alone waits forever once an index has failed
# (the Job then never completes): this waits for whichever of Complete and Failed comes
# first. A failed measuring Job is still merged (the merge names the missing shards);
# exits 1 if either Job failed, 2 if REGTRACK_K8S_TIMEOUT seconds (6 h) pass first.
set -eu
manifest=${1:-$(dirname "$0")/kubernetes-indexed-job.yaml}
timeout=${REGTRACK_K8S_TIMEOUT:-21600}
poll=${REGTRACK_K8S_POLL:-10}

# Complete or Failed, once the Job has either condition (polled; kubectl wait takes one).
finished() {
    waited=0
    while :; do
        conditions=$(kubectl get "job/$1" \
            -o 'jsonpath={.status.conditions[?(@.status=="True")].type}')
        case " $conditions " in
            *" Complete "*) echo Complete; return 0 ;;
            *" Failed "*) echo Failed; return 0 ;;
        esac
        if [ "$waited" -ge "$timeout" ]; then
            echo "regtrack on Kubernetes: job/$1 still running after ${timeout} s" >&2
            exit 2
        fi
        sleep "$poll"
        waited=$((waited + poll))
    done
}

kubectl delete -f "$manifest" --ignore-not-found --wait >/dev/null  # a Job runs once
kubectl apply -f "$manifest" -l regtrack/step=measure
measured=$(finished regtrack-shards)
echo "regtrack on Kubernetes: job/regtrack-shards $measured" >&2
kubectl apply -f "$manifest" -l regtrack/step=merge
merged=$(finished regtrack-merge)
kubectl logs job/regtrack-merge
echo "regtrack on Kubernetes: job/regtrack-merge $merged" >&2
[ "$measured" = Complete ] && [ "$merged" = Complete ] || exit 1
