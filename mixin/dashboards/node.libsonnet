// Ledger / Node and chain detail: one or a few nodes in depth.
local g = import '../lib/grafana.libsonnet';

{
  grafanaDashboards+:: {
    'ledger-node.json':
      local c = $._config;
      local pick = 'job=~"$job", instance=~"$instance"';
      local L = '%s, %s' % [c.ledgerSelector, pick];
      local N = L + ', node=~"$node"';
      local B = N + ', blockchain=~"$blockchain"';
      local perNode = '{{node}} · {{blockchain}}';
      g.dashboard(
        c,
        'ledger-node',
        'Node and chain detail',
        'One or a few nodes in depth: heights and block rate, queues, voting and council, consensus settings, feature flags and version.',
        [
          g.queryVariable('job', 'Job', 'ledger_node_up{%s}' % c.ledgerSelector),
          g.queryVariable('instance', 'Instance', 'ledger_node_up{%s, job=~"$job"}' % c.ledgerSelector),
          g.queryVariable('node', 'Node', 'ledger_node_up{%s}' % L),
          g.queryVariable('blockchain', 'Blockchain', 'ledger_blockchain_up{%s}' % N),
        ],
        [
          g.row(1, 'Node'),
          g.stateTimeline(
            2,
            'Up',
            "1 when the exporter read the node's /health in that cycle.",
            [g.target('ledger_node_up{%s}' % N, '{{node}}')],
            g.boolMapping(['down', 'red'], ['up', 'green']),
            size=[12, 6],
          ),
          g.table(
            3,
            'Node version',
            'Identity reported by /health (ledger_node_info labels).',
            [g.tableTarget('ledger_node_info{%s}' % N)],
            ['node', 'node_version', 'node_id', 'peer_id'],
            hide=['Value', 'instance', 'job'],
            renames={ node_id: 'node id', node_version: 'version', peer_id: 'peer id' },
            size=[12, 6],
          ),
          g.timeseries(
            4,
            'Peers',
            'Peers connected to the node (network.peerCount).',
            [g.target('ledger_node_peers{%s}' % N, '{{node}}')],
            size=[8, 7],
          ),
          g.timeseries(
            5,
            'Blockchains tracked',
            "Blockchains the node's /health lists.",
            [g.target('ledger_node_blockchains{%s}' % N, '{{node}}')],
            size=[8, 7],
          ),
          g.timeseries(
            6,
            'Chain peers',
            'Peers participating in each chain (blockchainPeers).',
            [g.target('ledger_blockchain_peers{%s}' % B, perNode)],
            size=[8, 7],
          ),
          g.row(7, 'Blocks'),
          g.timeseries(
            8,
            'Height',
            'Block height (blockHeight).',
            [g.target('ledger_blockchain_height{%s}' % B, perNode)],
            softMin=false,
          ),
          g.timeseries(
            9,
            'Block rate',
            'Blocks per second: deriv() of the height, a gauge; a chain restarting from 0 shows one dip below 0.',
            [g.target('deriv(ledger_blockchain_height{%s}[$__rate_interval])' % B, perNode)],
            unit='suffix: blocks/s',
          ),
          g.timeseries(
            10,
            'Blocks behind',
            'Blocks behind the highest node of the chain among the nodes the exporter polls.',
            [g.target('ledger_blockchain_blocks_behind{%s}' % B, perNode)],
          ),
          g.timeseries(
            11,
            'Time since last block and message',
            "Since the height last changed (exporter's clock) and since lastMessageTime (node's clock).",
            [
              g.target('time() - ledger_blockchain_height_last_change_timestamp_seconds{%s}' % B, perNode + ' block'),
              g.target('time() - ledger_blockchain_last_message_timestamp_seconds{%s}' % B, perNode + ' message'),
            ],
            unit='s',
          ),
          g.row(12, 'Queues'),
          g.timeseries(
            13,
            'Pending messages',
            'Queued messages (pendingMessagesCount). LedgerPendingMessagesHigh fires above %d for 10m.' % c.pendingMessagesThreshold,
            [g.target('ledger_blockchain_pending_messages{%s}' % B, perNode)],
            size=[8, 8],
          ),
          g.timeseries(
            14,
            'Delayed messages',
            'Queued delayed messages (delayedMessagesCount). LedgerDelayedMessagesHigh fires above %d for 10m.' % c.delayedMessagesThreshold,
            [g.target('ledger_blockchain_delayed_messages{%s}' % B, perNode)],
            size=[8, 8],
          ),
          g.timeseries(
            15,
            'Pending transactions',
            'Queued transactions (pendingTransactions).',
            [g.target('ledger_blockchain_pending_transactions{%s}' % B, perNode)],
            size=[8, 8],
          ),
          g.row(16, 'Voting and council'),
          g.timeseries(
            17,
            'Vote sessions',
            'Active vote sessions (voteSessions).',
            [g.target('ledger_blockchain_vote_sessions{%s}' % B, perNode)],
            size=[8, 8],
          ),
          g.timeseries(
            18,
            'Highest vote round',
            'Highest round among active vote sessions; no point when there is no session. LedgerVoteRoundsEscalating fires above %d for 5m.' % c.voteRoundThreshold,
            [g.target('ledger_blockchain_vote_round{%s}' % B, perNode)],
            size=[8, 8],
          ),
          g.timeseries(
            19,
            'Council size against minimum',
            "Council members the node sees, and the chain's consensus.minMembers (lines without fill, so they can cross).",
            [
              g.target('ledger_blockchain_council_members{%s}' % B, perNode + ' members'),
              g.target('ledger_blockchain_consensus_min_members{%s}' % B, perNode + ' minimum'),
            ],
            fill=0,
            size=[8, 8],
          ),
          g.stateTimeline(
            20,
            'Council and voting state',
            'isInCouncil, isVoting and isTimeToVote per node and chain.',
            [
              g.target('ledger_blockchain_in_council{%s}' % B, perNode + ' in council'),
              g.target('ledger_blockchain_voting{%s}' % B, perNode + ' voting'),
              g.target('ledger_blockchain_time_to_vote{%s}' % B, perNode + ' time to vote'),
            ],
            g.boolMapping(['no', 'transparent'], ['yes', 'blue']),
            size=[24, 8],
          ),
          g.row(21, 'Consensus settings and features'),
          g.table(
            22,
            'Consensus settings',
            'Consensus configuration of each chain as the node reports it (ledger_blockchain_consensus_info labels and settings).',
            [
              g.tableTarget('ledger_blockchain_consensus_info{%s}' % B),
              g.tableTarget('ledger_blockchain_consensus_min_members{%s}' % B),
              g.tableTarget('ledger_blockchain_consensus_timeout_seconds{%s}' % B),
              g.tableTarget('ledger_blockchain_tx_max_time_trigger_seconds{%s}' % B),
              g.tableTarget('ledger_blockchain_tx_karma_threshold{%s}' % B),
              g.tableTarget('ledger_blockchain_tx_mint_threshold{%s}' % B),
            ],
            ['node', 'blockchain', 'consensus_type', 'key_type', 'Value #B', 'Value #C', 'Value #D', 'Value #E', 'Value #F'],
            hide=['Value #A', 'instance', 'job'],
            renames={
              'Value #B': 'min members',
              'Value #C': 'consensus timeout (s)',
              'Value #D': 'tx max time trigger (s)',
              'Value #E': 'tx karma threshold',
              'Value #F': 'tx mint threshold',
              consensus_type: 'consensus type',
              key_type: 'key type',
            },
            merge=true,
            size=[24, 8],
          ),
          g.table(
            23,
            'Feature flags',
            "One row per flag in the chain's features object, unknown flags included.",
            [g.tableTarget('ledger_blockchain_feature_enabled{%s}' % B)],
            ['node', 'blockchain', 'feature', 'Value'],
            hide=['instance', 'job'],
            renames={ Value: 'enabled' },
            cellType='color-background',
            mappings=g.boolMapping(['disabled', 'transparent'], ['enabled', 'green']),
          ),
          g.timeseries(
            24,
            'Consensus timeouts',
            'consensusTimeout and txMaxTimeTrigger over time (changes show reconfiguration).',
            [
              g.target('ledger_blockchain_consensus_timeout_seconds{%s}' % B, perNode + ' consensus timeout'),
              g.target('ledger_blockchain_tx_max_time_trigger_seconds{%s}' % B, perNode + ' tx max time trigger'),
            ],
            unit='s',
          ),
          g.row(25, 'Agreement with the other polled nodes'),
          g.stateTimeline(
            26,
            'Agreement on block and council',
            "1 when this node holds the majority's block at the checkpoint / the majority's council set.",
            [
              g.target('ledger_blockchain_checkpoint_agrees{%s}' % B, 'block {{blockchain}}'),
              g.target('ledger_blockchain_council_agrees{%s}' % B, 'council {{blockchain}}'),
            ],
            g.boolMapping(['no', 'transparent'], ['yes', 'blue']),
          ),
          g.timeseries(
            27,
            'Peers and links to polled nodes',
            'Connected peers as the node reports them, and how many of the other polled nodes it is linked to.',
            [
              g.target('ledger_node_peers{%s}' % N, 'peers {{node}}'),
              g.target('ledger_node_polled_peers{%s}' % N, 'polled nodes linked {{node}}'),
            ],
          ),
        ],
      ),
  },
}
