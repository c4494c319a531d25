// Cross-node checks: the exporter compares what the nodes it polls report in the same cycle
// (README, "The network as a whole"). They see only the polled nodes.
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
          // polled nodes hold (or no hash has a majority). Absent when its block could not be
          // read, so a node that fails to answer never pages here.
          {
            alert: 'LedgerNodeOffMajorityBlock',
            expr: 'ledger_blockchain_checkpoint_agrees{%(ledgerSelector)s} == 0 and on(node) ledger_node_up{%(ledgerSelector)s} == 1' % $._config,
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
