#!/bin/bash
# usage: cmp.sh OSDP_BIN [extra plan args]
B=$1; shift
for f in scenarios/*.json; do
  n=$(basename $f .json)
  case $n in *.plan) continue;; local-cpu-cluster) continue;; esac
  $B plan $f --json "$@" > /tmp/cp_$n.json 2>/tmp/cp_$n.err || { echo "$n plan-fail $(head -c 150 /tmp/cp_$n.err)"; continue; }
  $B simulate $f --plan /tmp/cp_$n.json --json > /tmp/cs_$n.json 2>/tmp/cs_$n.err || { echo "$n sim-fail $(head -c 150 /tmp/cs_$n.err)"; continue; }
  python3 - $n <<'PY'
import json,sys
n=sys.argv[1]
p=json.load(open(f'/tmp/cp_{n}.json'));s=json.load(open(f'/tmp/cs_{n}.json'))
lim=p.get('memory_limit_bytes',0)/2**30
print(f"{n:38s} b={p['batch_size']:4d} t_plan={p['iteration_time_s']:.4f} t_sim={s['iteration_time_s']:.4f} dt={100*(p['iteration_time_s']/s['iteration_time_s']-1):+6.1f}%  peak_plan={p['peak_memory_bytes']/2**30:.3f} peak_sim={s['peak_memory_bytes']/2**30:.3f} dm={100*(p['peak_memory_bytes']/s['peak_memory_bytes']-1):+6.1f}% lim={lim:.2f}")
PY
done
