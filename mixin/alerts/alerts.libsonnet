// Every alert group, in the order of alerts.yml. Each alert gets its runbook_url from
// _config.runbookURLPattern (the alert's name in lower case: the section anchors of docs/alerts.md), and
// its description is folded into one line (the files write them as wrapped text blocks).
local fold(text) = std.join(' ', std.filter(function(line) line != '', std.split(text, '\n')));

(import 'exporter.libsonnet') +
(import 'fleet.libsonnet') +
(import 'node.libsonnet') +
(import 'blockchain.libsonnet') +
(import 'consensus.libsonnet') +
(import 'network.libsonnet') +
(import 'probe.libsonnet') +
(import 'watch.libsonnet') +
(import 'slo.libsonnet') +
{
  // The alerts that stay per replica of an HA pair (their rules are marked `perReplica`,
  // alerts/exporter.libsonnet): the exporter process's own, labelled with its replica
  // (_config.replicaLabels). Every other alert folds the replicas away. Alertmanager's
  // inhibition of a lost replica (alertmanager.libsonnet) holds back these only, and the
  // two-replica tests (tests/monitoring/test_rules_two_replicas.py) expect them once per replica.
  perReplicaAlerts:: std.set([
    rule.alert
    for group in $.prometheusAlerts.groups
    for rule in group.rules
    if std.objectHas(rule, 'alert') && std.get(rule, 'perReplica', false)
  ]),

  prometheusAlerts+:: {
    groups: [
      group {
        rules: [
          rule {
            annotations+: {
              description: fold(super.description),
              runbook_url: $._config.runbookURLPattern % std.asciiLower(rule.alert),
            },
          }
          for rule in group.rules
        ],
      }
      for group in super.groups
    ],
  },
}
