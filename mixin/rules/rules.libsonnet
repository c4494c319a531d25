// Recording rules, named level:metric:operations (https://prometheus.io/docs/practices/rules/).
local q = import '../lib/consensus.libsonnet';
local replicas = import '../lib/replicas.libsonnet';
//
// They precompute the fleet-wide views that are expensive or awkward to type: the alerts and
// the Grafana dashboards use the raw exporter metrics, so neither depends on these rules being
// loaded; use them for your own queries, federation and long-term storage.
//
// The replicas of an HA pair are folded (lib/replicas.libsonnet): every record has one series
// per logical exporter, node and chain, without the replica label, and a count or sum counts
// each node once.
local read(c, metric, how='max') = replicas.read(c, metric, c.ledgerSelector, how);
local range(c, f, metric, window, how='max') = replicas.range(c, f, metric, c.ledgerSelector, window, how);
{
  prometheusRules+:: {
    groups+: [
      {
        name: 'ledger-blockchain.rules',
        rules: [
          // Highest height of each chain among all nodes Prometheus scrapes (across
          // exporters, unlike ledger_blockchain_blocks_behind, which only compares one
          // exporter's nodes).
          {
            record: 'blockchain:ledger_blockchain_height:max',
            expr: 'max by (blockchain) (ledger_blockchain_height{%(ledgerSelector)s})' % $._config,
          },
          // How many blocks each node is behind the chain's highest node (0 for the leaders).
          {
            record: 'node_blockchain:ledger_blockchain_height:lag',
            expr: |||
              max by (blockchain) (ledger_blockchain_height{%(ledgerSelector)s})
              - on(blockchain) group_right()
              %(height)s
            ||| % ($._config { height: read($._config, 'ledger_blockchain_height') }),
          },
          // Blocks per second per node and chain over 5m. The height is a gauge that only
          // grows, so rate() reads it like a counter: unlike deriv(), it survives a chain
          // restarting from 0 (a deliberate choice; the name is part of the interface).
          {
            record: 'node_blockchain:ledger_blockchain_height:rate5m',
            expr: range($._config, 'rate', 'ledger_blockchain_height', '5m'),
          },
          // Blocks per second per chain: the fastest node's rate, which is the chain's own
          // pace.
          {
            record: 'blockchain:ledger_blockchain_height:max_rate5m',
            expr: 'max by (blockchain) (rate(ledger_blockchain_height{%(ledgerSelector)s}[5m]))' % $._config,
          },
          // Seconds since the node's height last changed (what LedgerBlockHeightStalled
          // tests).
          {
            record: 'node_blockchain:ledger_blockchain_height_last_change_timestamp_seconds:age',
            expr: 'time() - %s' % read($._config, 'ledger_blockchain_height_last_change_timestamp_seconds'),
          },
          // Seconds since the node processed its last message on the chain.
          {
            record: 'node_blockchain:ledger_blockchain_last_message_timestamp_seconds:age',
            expr: 'time() - %s' % read($._config, 'ledger_blockchain_last_message_timestamp_seconds'),
          },
        ],
      },
      {
        name: 'ledger-node.rules',
        rules: [
          // Failed requests per second by node, endpoint and reason over 5m (an HA pair's
          // replicas each poll the node: the higher of their two rates, not their sum).
          {
            record: 'node_endpoint_reason:ledger_node_scrape_errors:rate5m',
            expr: 'sum by (node, endpoint, reason) (%s)' % range($._config, 'rate', 'ledger_node_scrape_errors_total', '5m'),
          },
          // Nodes answering /health, and nodes polled, per exporter job.
          {
            record: 'job:ledger_node_up:sum',
            expr: 'sum by (job) (%s)' % read($._config, 'ledger_node_up'),
          },
          {
            record: 'job:ledger_node_up:count',
            expr: 'count by (job) (%s)' % read($._config, 'ledger_node_up'),
          },
          // Distinct node versions per job: 1 on a fleet on one release, 2 or more while an
          // upgrade rolls out (or a node was left behind). Probe mode too: each probe
          // answers its node's ledger_node_info.
          {
            record: 'job:ledger_node_info:distinct_node_versions',
            expr: 'count by (job) (count by (job, node_version) (ledger_node_info{%(ledgerSelector)s}))' % $._config,
          },
        ],
      },
      {
        name: 'ledger-consensus.rules',
        rules: [
          // Council members up among the polled nodes minus the votes a session requires
          // (LedgerCouncilQuorumThin's two sides): the members that may still be lost before
          // no vote can pass; 0 is LedgerCouncilQuorumThin. Where some members are not
          // polled it is a lower bound (they count as not up); the alert fires only where
          // every member is polled.
          {
            record: 'blockchain:ledger_network_blockchain_council_members_up:quorum_margin',
            expr: |||
              %(membersUp)s
              - on(%(exporterInstanceLabels)s, blockchain) %(required)s
            ||| % ($._config {
              membersUp: read($._config, 'ledger_network_blockchain_council_members_up'),
              required: std.rstripChars(q.requiredVotes($._config.ledgerSelector, $._config.exporterInstanceLabels), '\n'),
            }),
          },
          // Vote rounds that ended without agreement per chain and leader over 15m, the
          // highest count among an exporter's nodes (LedgerLeaderFailingRounds' value).
          {
            record: 'blockchain_leader:ledger_blockchain_leader_failed_rounds:increase15m',
            expr: |||
              max by (%(exporterInstanceLabels)s, blockchain, leader) (
                increase(ledger_blockchain_leader_failed_rounds_total{%(ledgerSelector)s}[15m])
              )
            ||| % $._config,
          },
        ],
      },
      // Probe mode (docs/probe-mode.md): each /probe answer covers one node, so what the
      // daemon computes across the nodes it polls is computed here across every scraped
      // node. Across Prometheus shards, evaluate these where all shards' series meet (Thanos
      // Ruler, or a Prometheus federating the shards). The daemon's
      // ledger_blockchain_blocks_behind is node_blockchain:ledger_blockchain_height:lag
      // above, which needs no probe rule.
      {
        name: 'ledger-probe.rules',
        rules: [
          // Probed nodes whose /health was read, and nodes probed, per job.
          {
            record: 'job:ledger_probe_success:sum',
            expr: 'sum by (job) (%s)' % read($._config, 'ledger_probe_success'),
          },
          {
            record: 'job:ledger_probe_success:count',
            expr: 'count by (job) (%s)' % read($._config, 'ledger_probe_success'),
          },
          // Height changes over the last 10m: 0 for a stalled chain. It stands in for the
          // daemon's ledger_blockchain_height_last_change_timestamp_seconds, which needs
          // memory across polls that a stateless probe has not.
          {
            record: 'node_blockchain:ledger_blockchain_height:changes10m',
            expr: range($._config, 'changes', 'ledger_blockchain_height', '10m'),
          },
        ],
      },
    ],
  },
}
