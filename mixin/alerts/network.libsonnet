// Cross-node checks: the exporter compares what the nodes it polls report in the same cycle
// (docs/network-and-consensus.md). They see only the polled nodes.

//
// With an HA pair every series is read folded over the replicas (lib/replicas.libsonnet): a
// node agrees with the majority when either replica read it agreeing (so a node is named off
// the majority only when both replicas read it so), a count of distinct values (hashes,
// council views) or of groups is the higher of the two (the replica that reads more nodes
// sees more), each node counts once.

local q = import '../lib/consensus.libsonnet';
local replicas = import '../lib/replicas.libsonnet';

// A strict majority exists for a chain, per exporter (lib/consensus.libsonnet): grouped by
// _config.exporterInstanceLabels (default job and instance) and the chain.
local majorityExists(metric, config) = q.majorityExists(metric, config.ledgerSelector, config.exporterInstanceLabels, config.replicaLabels);
local read(c, metric, how='max') = replicas.read(c, metric, c.ledgerSelector, how);
{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-network',
        rules: [
          // Nodes hold different blocks at the checkpoint height, several blocks below the
          // height a strict majority of the polled nodes reached: blocks that deep are final,
          // so two hashes there are a fork, not a race. The chain's page needs more than one
          // node's word: no strict majority (a 1-1 or 2-2 split, no node named then), or at
          // least two nodes off the majority. One node off a majority (a broken node, or one
          // answering a new hash on every read) is that node's LedgerNodeOffMajorityBlock,
          // not the chain's fork: it neither pages for the chain nor, through the inhibition
          // of this alert, holds back the watched-value disagreements of the whole chain.
          // 2m rides out a single odd answer; the chain-level alert pages once per chain.
          {
            alert: 'LedgerBlockchainForked',
            expr: |||
              %(hashes)s > 1
              unless on(%(exporterInstanceLabels)s, blockchain) (
                %(blockMajority)s
                unless on(%(exporterInstanceLabels)s, blockchain)
                count by (%(exporterInstanceLabels)s, blockchain) (%(agrees)s == 0) > 1
              )
            ||| % ($._config {
              hashes: read($._config, 'ledger_network_blockchain_checkpoint_hashes'),
              agrees: read($._config, 'ledger_blockchain_checkpoint_agrees'),
              blockMajority: majorityExists('ledger_blockchain_checkpoint_agrees', $._config),
            }),
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain has forked.',
              description: |||
                The polled nodes hold {{ $value }} different blocks at the checkpoint height of
                blockchain {{ $labels.blockchain }}, with no strict majority or with more than
                one node off it; ledger_blockchain_checkpoint_agrees == 0 names the nodes off
                the majority.
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
              %(agrees)s == 0
              and on(%(exporterInstanceLabels)s, blockchain) %(blockMajority)s
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
            ||| % ($._config {
              agrees: read($._config, 'ledger_blockchain_checkpoint_agrees'),
              up: read($._config, 'ledger_node_up'),
              blockMajority: majorityExists('ledger_blockchain_checkpoint_agrees', $._config),
            }),
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
            expr: '%s > 1' % read($._config, 'ledger_network_blockchain_council_views'),
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
              %(agrees)s == 0
              and on(%(exporterInstanceLabels)s, blockchain) %(councilMajority)s
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
            ||| % ($._config {
              agrees: read($._config, 'ledger_blockchain_council_agrees'),
              up: read($._config, 'ledger_node_up'),
              councilMajority: majorityExists('ledger_blockchain_council_agrees', $._config),
            }),
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
          // The up polled nodes fall into several groups with no peer link between them, and
          // none of them holds a strict majority of the up polled nodes
          // (ledger_network_peer_largest_partition_nodes, the largest group's size, at most
          // half of them: a 2-2 split), with at least two nodes outside the largest group. One
          // node cut off from the rest, or one that changes its peerId and lists no peers, is
          // never the network's page: it is that node's LedgerNodeIsolated, and a partition
          // that needs more than one node's word cannot be one node's doing, so its
          // inhibition of the other nodes' LedgerNodePeersLow is not either. A network of two
          // nodes cut apart pages through each node's LedgerNodePeersLost. 2m rides out a
          // reconnect. With an HA pair, the largest group is the larger of the two replicas'
          // (both must see no majority) and each up node counts once.
          {
            alert: 'LedgerNetworkPartitioned',
            expr: |||
              max by (%(exporterInstanceLabels)s) (ledger_network_peer_partitions{%(ledgerSelector)s}) > 1
              and on(%(exporterInstanceLabels)s)
                2 * %(largest)s
                <= on(%(exporterInstanceLabels)s) count by (%(exporterInstanceLabels)s) (%(up)s == 1)
              and on(%(exporterInstanceLabels)s)
                count by (%(exporterInstanceLabels)s) (%(up)s == 1)
                - on(%(exporterInstanceLabels)s) %(largest)s
                >= 2
            ||| % ($._config {
              largest: read($._config, 'ledger_network_peer_largest_partition_nodes'),
              up: read($._config, 'ledger_node_up'),
            }),
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'The ledger network is partitioned: no group of nodes holds a majority.',
              description: |||
                The nodes polled by {{ $labels.instance }} form {{ $value }} groups with no peer
                link between them, none with a strict majority of the up nodes;
                ledger_node_polled_peers == 0 names nodes cut off alone.
              |||,
            },
          },
          // One up node linked to no other up polled node (neither lists the other in
          // networkPeers) while other polled nodes are linked together (the largest group holds
          // two or more): this node is cut off from the network, or answers with another
          // peerId than its peers know. Its own alert, a warning: the rest of the network
          // works, and one node must not page for the network. When no group holds a majority
          // LedgerNetworkPartitioned pages and holds this back. 5m: longer than a peer
          // reconnect and a restart, which LedgerNodePeersLost (2m) says when the node has no
          // peer at all. With an HA pair, isolated as both replicas read it.
          {
            alert: 'LedgerNodeIsolated',
            expr: |||
              %(peers)s == 0
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
              and on(%(exporterInstanceLabels)s) %(largest)s >= 2
            ||| % ($._config {
              peers: read($._config, 'ledger_node_polled_peers'),
              up: read($._config, 'ledger_node_up'),
              largest: read($._config, 'ledger_network_peer_largest_partition_nodes'),
            }),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A ledger node is cut off from the other polled nodes.',
              description: |||
                Ledger node {{ $labels.node }} is linked by peers to none of the other up
                nodes polled by {{ $labels.instance }}, while they are linked to one another:
                it is cut off from the network, or it answers with another peerId than its
                peers know.
              |||,
            },
          },
          // A node lists chains the exporter did not expect of it
          // (ledger_node_unexpected_blockchains: chains no other up polled node lists, or
          // outside the node's `expect.blockchains` where set). Nothing about such a chain
          // pages (lib/consensus.libsonnet `expected`): a node that makes up chains, or a
          // chain deployed on one node only, is this one warning, naming how many. 15m: a new
          // chain rolled out node by node reaches the second node within minutes. With an HA
          // pair, the lower count the replicas read (both must see it).
          {
            alert: 'LedgerNodeUnexpectedBlockchains',
            expr: |||
              %(unexpected)s > 0
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
            ||| % ($._config {
              unexpected: read($._config, 'ledger_node_unexpected_blockchains', 'min'),
              up: read($._config, 'ledger_node_up'),
            }),
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A ledger node lists blockchains the other nodes do not.',
              description: |||
                Ledger node {{ $labels.node }} lists {{ $value }} blockchain(s) that no other
                up node polled by {{ $labels.instance }} lists, or that its expect.blockchains
                leaves out; no alert about those chains pages.
              |||,
            },
          },
        ],
      },
    ],
  },
}
