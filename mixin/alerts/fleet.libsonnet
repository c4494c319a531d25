// The fleet as a whole: every node at once, the software the nodes run, planned maintenance.
// These name a cause that per-node alerts each see a part of; the inhibit_rules of the
// shipped Alertmanager config (alertmanager.libsonnet) hold those back while they fire.
local replicas = import '../lib/replicas.libsonnet';
local versions = import '../lib/versions.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-fleet',
        rules: [
          // No node the exporter polls answers: the exporter's own network path (DNS, a
          // firewall, a proxy, its credentials) or the whole network is down, one cause for
          // what would otherwise be a LedgerNodeDown per node. 1m, a minute less than
          // LedgerNodeDown's 2m: the nodes of a failing path fall silent over a cycle or two,
          // not at one instant, and the cause must fire no later than the first node's page
          // for the inhibition to hold that page back. Two nodes or more: an exporter of
          // one node has LedgerNodeDown say it, after its 2m.
          // Per exporter (exporterInstanceLabels): a second exporter that still reaches the
          // nodes tells the two causes apart. Probe mode has no ledger_node_up 0 (a failed
          // probe is ledger_probe_success 0), so this is the daemon's. With an HA pair, no
          // replica reaches any node, each node counted once; a replica alone cut off from
          // every node is that replica's LedgerExporterReplicaNodeUnreachable, per node.
          {
            alert: 'LedgerAllNodesDown',
            expr: |||
              count by (%(exporterInstanceLabels)s) (%(up)s) > 1
              and on(%(exporterInstanceLabels)s) max by (%(exporterInstanceLabels)s) (%(up)s) == 0
            ||| % ($._config { up: replicas.read($._config, 'ledger_node_up', $._config.ledgerSelector) }),
            'for': '1m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'No ledger node answers the exporter.',
              description: |||
                None of the {{ $value }} ledger nodes polled by the exporter {{ $labels.instance }}
                (job {{ $labels.job }}) answers /health: the exporter's own network path or the
                whole network is down.
              |||,
            },
          },
          // The nodes of a job run more than one nodeVersion for versionDriftFor (12h): a
          // rolling upgrade, node by node, fits in a working day; longer, and a node was left
          // behind (or rolled back) and the fleet runs mixed software nobody tested together.
          // By job: the fleet as Prometheus sees it, probe mode included (each probe
          // answers its node's ledger_node_info). The inner `count by (job, node_version)`
          // counts versions, so two replicas reading the same versions add none.
          {
            alert: 'LedgerNodeVersionDrift',
            expr: |||
              count by (job) (count by (job, node_version) (ledger_node_info{%(ledgerSelector)s})) > 1
            ||| % $._config,
            'for': $._config.versionDriftFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The ledger nodes run different software versions for more than %s.' % utils.durationText($._config.versionDriftFor),
              description: |||
                The ledger nodes of job {{ $labels.job }} report {{ $value }} different node
                versions, for more than %s; ledger_node_info's node_version label names each
                node's.
              ||| % utils.durationText($._config.versionDriftFor),
            },
          },
        ] + (
          if $._config.minimumNodeVersion == '' || versions.belowRegex($._config.minimumNodeVersion) == '' then []
          else [
            // A node reports a nodeVersion below minimumNodeVersion (off unless set): a
            // release the network no longer supports (a security fix, a consensus change).
            // PromQL cannot compare versions, so the regex of every version below the
            // minimum is written here (lib/versions.libsonnet). 10m rides out a node's
            // upgrade, during which it may answer with either version. With an HA pair, one
            // alert per node (the replicas folded).
            {
              alert: 'LedgerNodeVersionBelowMinimum',
              expr: replicas.read($._config, 'ledger_node_info', '%(ledgerSelector)s, node_version=~"%(below)s"' % ($._config {
                below: std.strReplace(versions.belowRegex($._config.minimumNodeVersion), '\\', '\\\\'),
              })),
              'for': '10m',
              labels: { severity: 'warning' },
              annotations: {
                summary: 'A ledger node runs a version below the minimum of %s.' % $._config.minimumNodeVersion,
                description: |||
                  Ledger node {{ $labels.node }} runs version {{ $labels.node_version }}, below
                  the minimum of %s the network supports.
                ||| % $._config.minimumNodeVersion,
              },
            },
          ]
        ) + [
          // The exporter's configuration puts the node in maintenance (its `maintenance`
          // list; ledger_node_maintenance is 1 while an entry applies). Info, never a page:
          // it exists to inhibit every other alert of the node in Alertmanager, and to say
          // why they are quiet. `for: 0s`: an entry is planned, not a flapping reading, and
          // it must inhibit from the first evaluation, before the node is taken down. With an
          // HA pair, in maintenance as either replica's config says (one alert for the pair).
          {
            alert: 'LedgerNodeInMaintenance',
            expr: '%s == 1' % replicas.read($._config, 'ledger_node_maintenance', $._config.ledgerSelector),
            'for': '0s',
            labels: { severity: 'info' },
            annotations: {
              summary: 'A ledger node is in planned maintenance.',
              description: |||
                Ledger node {{ $labels.node }} is in maintenance ({{ $labels.reason }}), as the
                exporter {{ $labels.instance }} is configured; its other alerts are inhibited.
              |||,
            },
          },
          // The same for a whole chain (a chain-wide maintenance entry): inhibits every
          // alert of the chain. `for: 0s`, as above; folded as above.
          {
            alert: 'LedgerBlockchainInMaintenance',
            expr: '%s == 1' % replicas.read($._config, 'ledger_blockchain_maintenance', $._config.ledgerSelector),
            'for': '0s',
            labels: { severity: 'info' },
            annotations: {
              summary: 'A blockchain is in planned maintenance.',
              description: |||
                Blockchain {{ $labels.blockchain }} is in maintenance ({{ $labels.reason }}), as
                the exporter {{ $labels.instance }} is configured; its other alerts are
                inhibited.
              |||,
            },
          },
        ],
      },
    ],
  },
}
