// Probe mode (docs/probe-mode.md): the exporter answers /probe per node and keeps no
// state, so a node that cannot be read has only ledger_probe_success 0 (no ledger_node_up 0),
// and a stall is seen in Prometheus's history instead of the exporter's.
//
// Two probe exporters behind one job (an HA pair, told apart by _config.replicaLabels) are
// folded as the daemon's pair: a node fails when no replica could probe it, a height is
// stalled when neither saw it change.
local replicas = import '../lib/replicas.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-probe',
        rules: [
          // The probe could not read the node's /health. 2m = 8 probes at the 15s interval of
          // deploy/prometheus/probe.yml: one slow answer or a quick restart does not page. The
          // description says where the reason is: the probe's own log, &debug=true.
          {
            alert: 'LedgerProbeFailed',
            expr: '%s == 0' % replicas.read($._config, 'ledger_probe_success', $._config.ledgerSelector),
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A ledger node cannot be probed.',
              description: |||
                The probe of ledger node {{ $labels.instance }} (job {{ $labels.job }}) cannot read
                its /health; its blockchains are not monitored while it fails. The exporter's
                /probe?target={{ $labels.instance }}&debug=true shows each request and why.
              |||,
            },
          },
          // The height has not changed in probeStalledWindow (10m) of probes, on a series at
          // least that old (a chain just discovered is not stalled), while work waits: as for
          // LedgerBlockHeightStalled, an idle chain (no pending transaction, no open vote
          // session) never fires. Series with the daemon's last-change timestamp are left to
          // LedgerBlockHeightStalled, so nothing pages twice. The height must still be read now:
          // a node that stops answering leaves its last heights in the window, all equal once
          // the earlier ones age out, and it is LedgerProbeFailed's (or LedgerNodeDown's, whose
          // node has no last-change timestamp any more), never a stall.
          {
            alert: 'LedgerProbeBlockHeightStalled',
            expr: |||
              %(changes)s == 0
              and %(heightBefore)s
              and %(height)s
              unless on(node, blockchain) ledger_blockchain_height_last_change_timestamp_seconds{%(ledgerSelector)s}
              unless on(%(exporterInstanceLabels)s, node, blockchain) (
                %(pending)s == 0
                and on(%(exporterInstanceLabels)s, node, blockchain) %(sessions)s == 0
              )
            ||| % ($._config {
              changes: replicas.range($._config, 'changes', 'ledger_blockchain_height', $._config.ledgerSelector, $._config.probeStalledWindow),
              heightBefore: replicas.fold($._config, 'ledger_blockchain_height{%(ledgerSelector)s} offset %(probeStalledWindow)s' % $._config),
              height: replicas.read($._config, 'ledger_blockchain_height', $._config.ledgerSelector),
              pending: replicas.read($._config, 'ledger_blockchain_pending_transactions', $._config.ledgerSelector, 'min'),
              sessions: replicas.read($._config, 'ledger_blockchain_vote_sessions', $._config.ledgerSelector, 'min'),
            }),
            'for': '1m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain height has not changed in %s of probes.' % utils.durationText($._config.probeStalledWindow),
              description: |||
                The height of blockchain {{ $labels.blockchain }} on ledger node
                {{ $labels.node }} has not changed in %s of probes, while transactions are
                pending or a vote session is open.
              ||| % utils.durationText($._config.probeStalledWindow),
            },
          },
        ],
      },
    ],
  },
}
