#!/bin/bash
# The table of docs/partition.md, "The chosen plan against every
# baseline": per example, training at 8 devices over NVLink and PCIe
# with --pipeline, the operator-partitioned plan's simulated step, the
# pipeline plan chosen instead (if any), both pipelines' steps and every
# operator-partitioning baseline's.
set -e
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/tofuc
go build -o "$bin" ./cmd/tofuc
for ml in "wresnet|" "rnn|" "transformer|" "multimodal|" "dlrm|--loss mse" "uno|--loss mse"; do
  m=${ml%%|*}
  loss=${ml#*|}
  for topo in h100-nvlink pcie; do
    out=$("$bin" partition examples/$m.tdl --train $loss --devices 8 --topology $topo --pipeline 2>&1)
    part=$(echo "$out" | grep -o 'step time  *[0-9.]* [mµ]*s' | head -1 | sed 's/step time *//')
    chosen=$(echo "$out" | grep -o "pipeline plan, not this one: [0-9.]* [mµ]*s" | sed 's/.*: //')
    gp=$(echo "$out" | grep -E '^  graphpipe ' | head -1 | awk '{print $(NF-5), $(NF-4)}')
    sq=$(echo "$out" | grep -E '^  sequential ' | head -1 | awk '{print $(NF-5), $(NF-4)}')
    base=$(echo "$out" | awk '/^  baseline/{f=1;next} f&&/^  [a-z_0-9]+ /{printf "%s %s %s, ", $1, $(NF-3), $(NF-2)} /^pipeline plans|^  your plan/{f=0}')
    echo "| $m | $topo | $part | ${chosen:-none} | ${gp:-none} | ${sq:-none} | ${base%, } |"
  done
done
