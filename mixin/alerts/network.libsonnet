// Cross-node checks: the exporter compares what the nodes it polls report in the same cycle
// (docs/network-and-consensus.md). They see only the polled nodes.

local q = import '../lib/consensus.libsonnet';

// A strict majority exists for a chain, per exporter (lib/consensus.libsonnet): grouped by
// _config.exporterInstanceLabels (default job and instance) and the chain.
local majorityExists(metric, config) = q.majorityExists(metric, config.ledgerSelector, config.exporterInstanceLabels);
{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-network',
        rules: [
          // Nodes hold different blocks at the checkpoint height, several blocks below the
          // height a strict majority of the polled nodes reached: blocks that deep are final,
          // so two hashes there are a fork, not a race. It fires with or without a majority
          // (a 1-1 or 2-2 split is a fork too, and no node is named then). 2m rides out a
          // single odd answer; the chain-level alert pages once per chain.
          {
            alert: 'LedgerBlockchainForked',
            expr: 'ledger_network_blockchain_checkpoint_hashes{%(ledgerSelector)s} > 1' % $._config,
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain has forked.',
              description: |||
                The polled nodes hold {{ $value }} different blocks at the checkpoint height of
                blockchain {{ $labels.blockchain }}; ledger_blockchain_checkpoint_agrees == 0
                names the nodes off the majority.
              |||,
            },
          },
          // This node's block at the checkpoint is not the one a strict majority of the
          // polled nodes hold, and such a majority exists: more than half of the nodes
          // compared on the chain by the same exporter (job, instance) agree. Without a
          // majority (a 1-1 or 2-2 split) no node can be called the odd one out, and naming
          // one would send the operator to take a healthy node out of service: the split is
          // LedgerBlockchainForked's business. Absent when the node's block could not be read
          // (down, or below the checkpoint), so such a node never pages here.
          {
            alert: 'LedgerNodeOffMajorityBlock',
            expr: |||
              ledger_blockchain_checkpoint_agrees{%(ledgerSelector)s} == 0
              and on(%(exporterInstanceLabels)s, blockchain) %(blockMajority)s
              and on(%(exporterInstanceLabels)s, node) ledger_node_up{%(ledgerSelector)s} == 1
            ||| % ($._config { blockMajority: majorityExists('ledger_blockchain_checkpoint_agrees', $._config) }),
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: "A ledger node holds another block than the majority's.",
              description: |||
                Ledger node {{ $labels.node }} holds a block at the checkpoint of blockchain
                {{ $labels.blockchain }} that a strict majority of the polled nodes do not.
              |||,
            },
          },
          // The up nodes report different council member sets for the chain. 5m: nodes polled
          // a moment apart can straddle a council change (council rotation) for a cycle or
          // two.
          {
            alert: 'LedgerCouncilViewsDiverge',
            expr: 'ledger_network_blockchain_council_views{%(ledgerSelector)s} > 1' % $._config,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Ledger nodes disagree on the council of a blockchain.',
              description: |||
                The polled nodes report {{ $value }} different council member sets for blockchain
                {{ $labels.blockchain }}; ledger_blockchain_council_agrees == 0 names the nodes
                off the majority.
              |||,
            },
          },
          // This node's council set is not the one a strict majority of the polled nodes
          // report, and such a majority exists (as for LedgerNodeOffMajorityBlock: a split
          // without a majority names no node; LedgerCouncilViewsDiverge covers it). 5m, as
          // for LedgerCouncilViewsDiverge: a council rotation is straddled for a cycle or two.
          {
            alert: 'LedgerNodeOffMajorityCouncil',
            expr: |||
              ledger_blockchain_council_agrees{%(ledgerSelector)s} == 0
              and on(%(exporterInstanceLabels)s, blockchain) %(councilMajority)s
              and on(%(exporterInstanceLabels)s, node) ledger_node_up{%(ledgerSelector)s} == 1
            ||| % ($._config { councilMajority: majorityExists('ledger_blockchain_council_agrees', $._config) }),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "A ledger node sees another council than the majority's.",
              description: |||
                Ledger node {{ $labels.node }} reports a council member set for blockchain
                {{ $labels.blockchain }} that a strict majority of the polled nodes do not.
              |||,
            },
          },
          // The up polled nodes fall into several groups with no peer link between them. A
          // node cut off from every polled node counts as its own group. 2m rides out a
          // reconnect.
          {
            alert: 'LedgerNetworkPartitioned',
            expr: 'ledger_network_peer_partitions{%(ledgerSelector)s} > 1' % $._config,
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'The ledger network is partitioned.',
              description: |||
                The nodes polled by {{ $labels.instance }} form {{ $value }} groups with no peer
                link between them; ledger_node_polled_peers == 0 names nodes cut off alone.
              |||,
            },
          },
        ],
      },
    ],
  },
}
