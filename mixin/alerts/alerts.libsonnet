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
{
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
