// Ledger / Fleet overview: every node and chain at a glance.
local g = import '../lib/grafana.libsonnet';
local q = import '../lib/consensus.libsonnet';
local r = import '../lib/replicas.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  grafanaDashboards+:: {
    'ledger-fleet.json':
      local c = $._config;
      // A node series as an HA pair's replicas agree (lib/replicas.libsonnet): one per node.
      local f(metric, s) = r.read(c, metric, s);
      local pick = 'job=~"$job", instance=~"$instance"';
      local L = '%s, %s' % [c.ledgerSelector, pick];
      local N = L + ', node=~"$node"';
      local B = N + ', blockchain=~"$blockchain"';
      // Per-chain network series have no node label.
      local C = L + ', blockchain=~"$blockchain"';
      // ALERTS carries the alert's own labels: no job selector of the config to match on.
      // Severity none is the always-firing LedgerWatchdog: no problem to count or list.
      local A = std.join(', ', std.filter(function(s) s != '', ['alertname=~"Ledger.*", alertstate="firing", severity!="none"', c.extraSelector, pick]));
      local perNode = '{{node}} · {{blockchain}}';
      g.dashboard(
        c,
        'ledger-fleet',
        'Fleet overview',
        'Every ledger node and chain at a glance: up, heights, lag, peers, sync and council state, agreement, quorum margin, consensus health, firing alerts.',
        [
          g.queryVariable('job', 'Job', 'ledger_node_up{%s}' % c.ledgerSelector),
          g.queryVariable('instance', 'Instance', 'ledger_node_up{%s, job=~"$job"}' % c.ledgerSelector),
          g.queryVariable('node', 'Node', 'ledger_node_up{%s}' % L),
          g.queryVariable('blockchain', 'Blockchain', 'ledger_blockchain_up{%s}' % N),
        ],
        [
          g.row(1, 'Fleet'),
          g.stat(
            2,
            'Nodes up',
            'Nodes whose /health the exporter read in its last cycle.',
            [g.target('sum(%s)' % f('ledger_node_up', N), 'up')],
            size=[4, 4],
          ),
          g.stat(
            3,
            'Nodes down',
            'Nodes the exporter could not read in its last cycle.',
            [g.target('count(%s == 0) or vector(0)' % f('ledger_node_up', N), 'down')],
            steps=g.thresholds('green', [[1, 'red']]),
            size=[4, 4],
          ),
          g.stat(
            4,
            'Blockchains',
            'Distinct blockchains reported by the selected nodes.',
            [g.target('count(count by (blockchain) (ledger_blockchain_up{%s}))' % B, 'chains')],
            size=[4, 4],
          ),
          g.stat(
            5,
            'Max blocks behind',
            "Worst lag of any selected node behind its chain's highest node.",
            [g.target('max(%s)' % f('ledger_blockchain_blocks_behind', B), 'blocks behind')],
            steps=g.thresholds('green', [[5, 'orange'], [c.blocksBehindThreshold, 'red']]),
            size=[4, 4],
          ),
          g.stat(
            6,
            'Longest time since last block',
            "Longest time any selected node has kept the same height. LedgerBlockHeightStalled fires only while work waits, after the chain's txMaxTimeTrigger + consensusTimeout + %s (%s where the node reports neither); an idle chain may stay red here for hours, healthy." % [utils.durationText(c.stallGrace), utils.durationText(c.heightStalled)],
            [g.target('max(time() - %s)' % f('ledger_blockchain_height_last_change_timestamp_seconds', B), 'since last block')],
            unit='s',
            steps=g.thresholds('green', [[utils.durationSeconds(c.heightStalled) / 2, 'orange'], [utils.durationSeconds(c.heightStalled), 'red']]),
            size=[4, 4],
          ),
          g.stat(
            7,
            'Firing Ledger alerts',
            'Ledger alerts firing in this Prometheus for the selected jobs and instances.',
            [g.target('count(%s) or vector(0)' % f('ALERTS', A), 'firing')],
            steps=g.thresholds('green', [[1, 'red']]),
            size=[4, 4],
          ),
          g.stateTimeline(
            8,
            'Node up',
            "1 when the exporter read the node's /health in that cycle.",
            [g.target(f('ledger_node_up', N), '{{node}}')],
            g.boolMapping(['down', 'red'], ['up', 'green']),
            size=[24, 6],
          ),
          g.row(9, 'Chains'),
          g.timeseries(
            10,
            'Height per chain',
            'Highest block height of each chain among the selected nodes.',
            [g.target('max by (blockchain) (ledger_blockchain_height{%s})' % B, '{{blockchain}}')],
            softMin=false,
          ),
          g.timeseries(
            11,
            'Block rate per chain',
            'Blocks per second of each chain (its fastest node): deriv() of the height, a gauge; a chain restarting from 0 shows one dip below 0.',
            [g.target('max by (blockchain) (deriv(ledger_blockchain_height{%s}[$__rate_interval]))' % B, '{{blockchain}}')],
            unit='suffix: blocks/s',
          ),
          g.timeseries(
            12,
            'Height by node',
            'Block height of every selected node and chain.',
            [g.target(f('ledger_blockchain_height', B), perNode)],
            softMin=false,
          ),
          g.timeseries(
            13,
            'Blocks behind',
            'Blocks each node is behind the highest node of the chain (as the exporter sees it). LedgerNodeBehind fires above %d for 10m.' % c.blocksBehindThreshold,
            [g.target(f('ledger_blockchain_blocks_behind', B), perNode)],
          ),
          g.timeseries(
            14,
            'Time since last block',
            "Time since the exporter saw the node's height change.",
            [g.target('time() - %s' % f('ledger_blockchain_height_last_change_timestamp_seconds', B), perNode)],
            unit='s',
          ),
          g.timeseries(
            15,
            'Time since last message',
            "Time since the node's lastMessageTime (node's clock).",
            [g.target('time() - %s' % f('ledger_blockchain_last_message_timestamp_seconds', B), perNode)],
            unit='s',
          ),
          g.row(16, 'Network and consensus'),
          g.timeseries(
            17,
            'Peers per node',
            'Peers connected to each node (network.peerCount).',
            [g.target(f('ledger_node_peers', N), '{{node}}')],
          ),
          g.timeseries(
            18,
            'Chain peers',
            'Peers participating in each chain, per node (blockchainPeers).',
            [g.target(f('ledger_blockchain_peers', B), perNode)],
          ),
          g.stateTimeline(
            19,
            'Syncing',
            'Whether the node is syncing the chain.',
            [g.target(f('ledger_blockchain_syncing', B), perNode)],
            g.boolMapping(['in sync', 'green'], ['syncing', 'orange']),
          ),
          g.stateTimeline(
            20,
            'In council',
            'Whether the node is a council member of the chain.',
            [g.target(f('ledger_blockchain_in_council', B), perNode)],
            g.boolMapping(['not a member', 'transparent'], ['member', 'blue']),
          ),
          g.row(23, 'Network agreement'),
          g.stat(
            24,
            'Forked chains',
            'Chains whose polled nodes hold more than one block at the checkpoint height (a fork).',
            [g.target('count(%s > 1) or vector(0)' % f('ledger_network_blockchain_checkpoint_hashes', C), 'forked chains')],
            steps=g.thresholds('green', [[1, 'red']]),
          ),
          g.stat(
            25,
            'Chains with diverging councils',
            'Chains whose up nodes report more than one council member set.',
            [g.target('count(%s > 1) or vector(0)' % f('ledger_network_blockchain_council_views', C), 'chains')],
            steps=g.thresholds('green', [[1, 'orange']]),
          ),
          g.stat(
            26,
            'Peer partitions',
            'Groups of up polled nodes with no peer link between them (1: one connected network).',
            [g.target('max(%s)' % f('ledger_network_peer_partitions', L), 'partitions')],
            steps=g.thresholds('green', [[2, 'red']]),
          ),
          g.stat(
            27,
            "Nodes off the majority's block",
            "Selected nodes whose block at the checkpoint is not the majority's.",
            [g.target('count(%s == 0) or vector(0)' % f('ledger_blockchain_checkpoint_agrees', B), 'nodes')],
            steps=g.thresholds('green', [[1, 'red']]),
          ),
          g.timeseries(
            28,
            'Distinct block hashes at the checkpoint',
            'Per chain: 1 when every polled node holds the same block at the checkpoint, more on a fork.',
            [g.target(f('ledger_network_blockchain_checkpoint_hashes', C), '{{blockchain}}')],
          ),
          g.timeseries(
            29,
            'Checkpoint height',
            'Height at which block hashes are compared: the highest height a strict majority of the not-syncing nodes have reached, minus checkpoint_depth.',
            [g.target(f('ledger_network_blockchain_checkpoint_height', C), '{{blockchain}}')],
          ),
          g.stateTimeline(
            30,
            'Block agreement per node',
            "1 when the node's block at the checkpoint is the majority's; a gap when its block could not be read.",
            [g.target(f('ledger_blockchain_checkpoint_agrees', B), '{{node}} {{blockchain}}')],
            g.boolMapping(['off the majority', 'red'], ['agrees', 'green']),
          ),
          g.stateTimeline(
            31,
            'Council agreement per node',
            "1 when the node's council member set is the one a strict majority report.",
            [g.target(f('ledger_blockchain_council_agrees', B), '{{node}} {{blockchain}}')],
            g.boolMapping(['off the majority', 'orange'], ['agrees', 'green']),
          ),
          g.timeseries(
            32,
            'Links to other polled nodes',
            'How many of the other up polled nodes each node is linked to; 0: cut off from them.',
            [g.target(f('ledger_node_polled_peers', N), '{{node}}')],
          ),
          g.timeseries(
            33,
            'Council views per chain',
            'Distinct council member sets among the up nodes that read the chain (1: agreement).',
            [g.target(f('ledger_network_blockchain_council_views', C), '{{blockchain}}')],
          ),
          g.row(34, 'Consensus health'),
          g.stat(
            35,
            'Chains with a thin quorum',
            'Chains whose council members up among the polled nodes are down to the votes a session requires (LedgerCouncilQuorumThin), counted only where every member of the council is polled.',
            [g.target('count((%s <= on(job, instance, blockchain) %s) and on(job, instance, blockchain) (%s)) or vector(0)' % [f('ledger_network_blockchain_council_members_up', C), std.rstripChars(q.requiredVotes(C, 'job, instance'), '\n'), std.rstripChars(q.everyMemberPolled(C, 'job, instance', c.replicaLabels), '\n')], 'chains')],
            steps=g.thresholds('green', [[1, 'red']]),
          ),
          g.stat(
            36,
            'Chains with diverging consensus settings',
            'Chains whose up nodes report more than one consensus configuration (settings, key type and feature flags, compared by value).',
            [g.target('count(%s > 1) or vector(0)' % f('ledger_network_blockchain_consensus_views', C), 'chains')],
            steps=g.thresholds('green', [[1, 'orange']]),
          ),
          g.stat(
            37,
            'Oldest open vote session',
            'Age of the oldest vote session any selected node reports (LedgerVoteSessionStuck fires past %d consensus timeouts).' % c.voteSessionStuckTimeouts,
            [g.target('max(%s) or vector(0)' % f('ledger_blockchain_vote_session_age_seconds', B), 'oldest session')],
            unit='s',
          ),
          g.stat(
            38,
            'Node versions',
            'Distinct node versions among the selected nodes: more than one while an upgrade rolls out, or when a node was left behind.',
            [g.target('count(count by (node_version) (%s))' % f('ledger_node_info', N), 'versions')],
            steps=g.thresholds('green', [[2, 'orange']]),
          ),
          g.timeseries(
            39,
            'Quorum margin per chain',
            "Council members up among the polled nodes minus the votes a session requires (highest consensusRequired of the last hour, else consensus.minMembers): members the chain may still lose before no vote can pass. 0: LedgerCouncilQuorumThin (where every member is polled); below 0 the chain cannot mint. Where some members are not polled it is a lower bound: they are unknown, counted as not up.",
            [g.target('%s - on(job, instance, blockchain) %s' % [f('ledger_network_blockchain_council_members_up', C), std.rstripChars(q.requiredVotes(C, 'job, instance'), '\n')], '{{blockchain}}')],
            softMin=false,
          ),
          g.timeseries(
            40,
            'Council members polled and up',
            "Members of the majority's council that are a polled node (a member whose node is down included), and those whose node read the chain this cycle.",
            [
              g.target(f('ledger_network_blockchain_council_members_polled', C), '{{blockchain}} polled'),
              g.target(f('ledger_network_blockchain_council_members_up', C), '{{blockchain}} up'),
            ],
            fill=0,
          ),
          g.stateTimeline(
            41,
            'Consensus settings agreement per node',
            "1 when the node's consensus configuration is the one a strict majority report; 0 for all when none has a majority.",
            [g.target(f('ledger_blockchain_consensus_agrees', B), '{{node}} {{blockchain}}')],
            g.boolMapping(['off the majority', 'orange'], ['agrees', 'green']),
          ),
          g.timeseries(
            42,
            'Failed vote rounds per leader',
            'Rounds that ended without agreement in the last %s, per chain and leader, the highest count among the selected nodes (LedgerLeaderFailingRounds fires at %d).' % [utils.durationText(c.leaderFailedRoundsWindow), c.leaderFailedRoundsThreshold],
            [g.target('max by (blockchain, leader) (increase(ledger_blockchain_leader_failed_rounds_total{%s}[%s]))' % [B, c.leaderFailedRoundsWindow], '{{blockchain}} · {{leader}}')],
          ),
          g.row(21, 'Alerts'),
          g.table(
            43,
            'In maintenance',
            "Nodes and chains in maintenance now: the config's maintenance entries whose until has not passed (ledger_node_maintenance, ledger_blockchain_maintenance; a chain's entry has no node). Alertmanager's inhibit rules silence their alerts; the status page lists them with their until.",
            [g.tableTarget('%s or %s' % [f('ledger_node_maintenance', N), f('ledger_blockchain_maintenance', C)])],
            ['node', 'blockchain', 'reason', 'instance'],
            hide=['Value', 'job'],
            size=[24, 5],
          ),
          g.table(
            22,
            'Firing Ledger alerts',
            'Ledger alerts firing now for the selected jobs and instances (all nodes; exporter-level alerts have no node, and LedgerExporterAbsent, which has no instance, shows in Alertmanager only).',
            [g.tableTarget(f('ALERTS', A))],
            ['alertname', 'severity', 'node', 'blockchain'],
            hide=['Value', 'alertstate'],
            size=[24, 8],
          ),
        ],
      ),
  },
}
