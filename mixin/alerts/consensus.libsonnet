// Consensus: enough council members, votes that conclude, leaders that lead, settings the
// nodes agree on (docs/network-and-consensus.md, "Consensus health"). The cross-cycle series come from the daemon's
// memory; probe mode has none of them (docs/probe-mode.md, "What a probe answers").
//
// With an HA pair every series is read folded over the replicas (lib/replicas.libsonnet): a
// count that is "too low" (council members, members up) is the higher of the two replicas'
// and one that is "too high" (a vote round) the lower, so both must see it; a node is up when
// either reaches it.
local q = import '../lib/consensus.libsonnet';
local replicas = import '../lib/replicas.libsonnet';
local utils = import '../lib/utils.libsonnet';
local read(c, metric, how='max') = replicas.read(c, metric, c.ledgerSelector, how);

// A chain halted (lib/consensus.libsonnet `halted`), one line.
local halted(c) = std.rstripChars(q.halted(c, c.ledgerSelector, c.exporterInstanceLabels), '\n');

// A halt and its tail (lib/consensus.libsonnet `haltIncident`): the chain halted now, or
// LedgerBlockchainHalted fired within leaderFailedRoundsWindow (15m), the window over which
// failed rounds are counted. The vote-session and leader alerts take `unless` this: what a
// halt does to sessions, rounds and leaders is the halt's, before it fires and after it ends.
local haltIncident(c) = q.haltIncident(c, c.ledgerSelector, c.exporterInstanceLabels, c.leaderFailedRoundsWindow);

// The council members up among the polled nodes are down to the votes a session requires,
// fewer than the council has, and every member is polled (LedgerCouncilQuorumThin).
local quorumThin(c) =
  |||
    %(membersUp)s
    <= on(%(exporterInstanceLabels)s, blockchain) %(required)s
    and on(%(exporterInstanceLabels)s, blockchain)
      %(membersUp)s
      < on(%(exporterInstanceLabels)s, blockchain) %(membersPolled)s
    and on(%(exporterInstanceLabels)s, blockchain) (
      %(polled)s
    )
  ||| % (c {
    membersUp: read(c, 'ledger_network_blockchain_council_members_up'),
    membersPolled: read(c, 'ledger_network_blockchain_council_members_polled'),
    required: std.rstripChars(q.requiredVotes(c.ledgerSelector, c.exporterInstanceLabels), '\n'),
    polled: std.rstripChars(q.everyMemberPolled(c.ledgerSelector, c.exporterInstanceLabels, c.replicaLabels), '\n'),
  });

// The node's council below the chain's consensus.minMembers, on an up node
// (LedgerCouncilBelowMinMembers' two rules).
local belowMin(c) =
  '%s < %s\nand on(%s, node) %s == 1' % [
    read(c, 'ledger_blockchain_council_members'),
    read(c, 'ledger_blockchain_consensus_min_members'),
    c.exporterInstanceLabels,
    read(c, 'ledger_node_up'),
  ];

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-consensus',
        rules: [
          // The node sees fewer council members than the chain's consensus needs
          // (consensus.minMembers). While the chain still advances (no halt by
          // lib/consensus.libsonnet `halted`), it has its quorum whatever this node reports: a
          // warning about the node's view, as seen by this exporter. Once the chain has
          // stopped too, critical; LedgerBlockchainHalted (1m) names that incident first and
          // holds it back. 5m rides out a member rejoining after a restart.
          {
            alert: 'LedgerCouncilBelowMinMembers',
            expr: q.onlyExpected($._config, |||
              %(below)s
              unless on(%(exporterInstanceLabels)s, blockchain) %(halted)s
            ||| % ($._config { below: belowMin($._config), halted: halted($._config) })),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A ledger node sees a blockchain council below its consensus minimum, as seen by this exporter.',
              description: |||
                Ledger node {{ $labels.node }} reports {{ $value }} council members on blockchain
                {{ $labels.blockchain }}, fewer than consensus.minMembers, as seen by the
                exporter {{ $labels.instance }}; the chain still advances, so the council still
                reaches its quorum.
              |||,
            },
          },
          // The same once a strict majority of the chain's nodes have stalled: critical, and
          // LedgerBlockchainHalted's incident (it fires first and holds this back).
          {
            alert: 'LedgerCouncilBelowMinMembers',
            expr: q.onlyExpected($._config, |||
              %(below)s
              and on(%(exporterInstanceLabels)s, blockchain) %(halted)s
            ||| % ($._config { below: belowMin($._config), halted: halted($._config) })),
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain council is below its consensus minimum and the chain has stopped.',
              description: |||
                Ledger node {{ $labels.node }} reports {{ $value }} council members on blockchain
                {{ $labels.blockchain }}, fewer than consensus.minMembers, and a majority of the
                chain's nodes polled by {{ $labels.instance }} have stalled: consensus cannot be
                reached.
              |||,
            },
          },
          // A vote session past round voteRoundThreshold (3) for 5m: every round is a failed
          // attempt (a leader timed out or votes were missing), so rounds that keep climbing
          // mean consensus struggles.
          {
            alert: 'LedgerVoteRoundsEscalating',
            expr: q.onlyExpected($._config, |||
              %(round)s > %(voteRoundThreshold)d
              and on(node) %(up)s == 1
              unless on(%(exporterInstanceLabels)s, blockchain) %(halt)s
            ||| % ($._config {
              round: read($._config, 'ledger_blockchain_vote_round', 'min'),
              up: read($._config, 'ledger_node_up'),
              halt: haltIncident($._config),
            })),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Vote rounds escalate on a blockchain.',
              description: |||
                A vote session on blockchain {{ $labels.blockchain }} seen by ledger node
                {{ $labels.node }} is at round {{ $value }}, above %(voteRoundThreshold)d for 5 minutes.
              ||| % $._config,
            },
          },
          // The oldest vote session the node reports has been open longer than
          // voteSessionStuckTimeouts (5) x the chain's consensusTimeout, or
          // voteSessionStuck (10m) where the node reports no timeout: five rounds
          // have timed out without agreement, the usual BFT failure ("round changes continue
          // indefinitely with no new block"). Warning: the chain stops minting, and
          // LedgerBlockHeightStalled pages (critical) once a block is overdue; this says why.
          // `for: 2m` rides out a session closing just after the threshold.
          {
            alert: 'LedgerVoteSessionStuck',
            expr: q.onlyExpected($._config, |||
              %(stuck)s
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
              unless on(%(exporterInstanceLabels)s, blockchain) %(halt)s
            ||| % ($._config {
              up: read($._config, 'ledger_node_up'),
              stuck: std.rstripChars(q.sessionStuck($._config, $._config.ledgerSelector), '\n'),
              halt: haltIncident($._config),
            })),
            'for': '2m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A vote session does not close.',
              description: |||
                The oldest vote session ledger node {{ $labels.node }} reports on blockchain
                {{ $labels.blockchain }} has been open for {{ $value | humanizeDuration }},
                more than %(voteSessionStuckTimeouts)d consensus timeouts.
              ||| % $._config,
            },
          },
          // A council member whose rounds as leader keep ending without agreement:
          // leaderFailedRoundsThreshold (3) or more in leaderFailedRoundsWindow (15m) on any
          // polled node. One failure now and then is normal (a leader restarting, a slow
          // proposal). The highest count among the exporter's nodes, one alert per chain and
          // leader: every node sees the same leader fail, and it is paged once. `for: 1m`
          // only absorbs evaluation jitter; the window already smooths. Rounds failed while
          // the chain was halted are the halt's (LedgerBlockchainHalted names it; every leader
          // fails then): not counted while LedgerBlockchainHalted fired within the window, so
          // the alert neither fires during a halt nor after its recovery, when the window
          // still holds the halt's failures and the inhibition is gone. With an HA pair, the
          // `max by` takes the higher of the two replicas' increases (each counted on its own
          // counter, never summed).
          {
            alert: 'LedgerLeaderFailingRounds',
            expr: q.onlyExpected($._config, |||
              max by (%(exporterInstanceLabels)s, blockchain, leader) (
                increase(ledger_blockchain_leader_failed_rounds_total{%(ledgerSelector)s}[%(leaderFailedRoundsWindow)s])
              ) >= %(leaderFailedRoundsThreshold)d
              unless on(%(exporterInstanceLabels)s, blockchain) %(halt)s
            ||| % ($._config { halt: haltIncident($._config) })),
            'for': '1m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A council leader keeps failing its vote rounds.',
              description: |||
                Leader {{ $labels.leader }} of blockchain {{ $labels.blockchain }} failed
                {{ $value | printf "%%.0f" }} vote rounds in the last %(window)s, as the nodes
                polled by {{ $labels.instance }} saw them.
              ||| % ($._config { window: utils.durationText($._config.leaderFailedRoundsWindow) }),
            },
          },
          // The up nodes report more than one consensus configuration for the chain: the
          // consensus object, keyType and features compared by value. Nodes that disagree on
          // a timeout, a threshold or a feature flag may fork at the next block that depends
          // on it. 10m: a rolling configuration change straddles a few cycles per node.
          {
            alert: 'LedgerConsensusConfigDiverges',
            expr: q.onlyExpected($._config, '%s > 1' % read($._config, 'ledger_network_blockchain_consensus_views')),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Ledger nodes disagree on the consensus settings of a blockchain.',
              description: |||
                The polled nodes report {{ $value }} different consensus configurations for
                blockchain {{ $labels.blockchain }}; ledger_blockchain_consensus_agrees == 0
                names the nodes off the majority.
              |||,
            },
          },
          // This node's consensus configuration is not the one a strict majority of the
          // polled nodes report, and such a majority exists (as for LedgerNodeOffMajorityBlock:
          // a split without a majority names no node; LedgerConsensusConfigDiverges covers
          // it). 10m, as for LedgerConsensusConfigDiverges.
          {
            alert: 'LedgerNodeOffMajorityConsensus',
            expr: q.onlyExpected($._config, |||
              %(agrees)s == 0
              and on(%(exporterInstanceLabels)s, blockchain) %(majority)s
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
            ||| % ($._config {
              agrees: read($._config, 'ledger_blockchain_consensus_agrees'),
              up: read($._config, 'ledger_node_up'),
              majority: q.majorityExists('ledger_blockchain_consensus_agrees', $._config.ledgerSelector, $._config.exporterInstanceLabels, $._config.replicaLabels),
            })),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "A ledger node runs other consensus settings than the majority's.",
              description: |||
                Ledger node {{ $labels.node }} reports consensus settings, key type or feature
                flags for blockchain {{ $labels.blockchain }} that a strict majority of the
                polled nodes do not.
              |||,
            },
          },
          // A council margin lost, as seen by this exporter: the council members up among the
          // polled nodes are down to the votes a session requires (the highest
          // consensusRequired seen in the last hour, else consensus.minMembers) because members
          // are down or do not read the chain: fewer are up than the council has. A council
          // that never had a margin (as many members as votes required, all up) is not this
          // alert's: LedgerCouncilWithoutMargin (info) says so once, and nothing pages for a
          // design. Only where every member of the majority's council is a polled node: an
          // unpolled member is unknown, not down, so elsewhere this stays silent
          // (docs/network-and-consensus.md says so). A member counts as up when its node is up
          // and read the chain this cycle.
          // A chain whose height still advances has its quorum, whatever the exporter sees (a
          // member may only be unreachable from it): a warning, and a node down explains it
          // (LedgerNodeDown holds it back, Alertmanager's inhibit_rules). The page needs the
          // chain to stop as well (lib/consensus.libsonnet `halted`), and then it is
          // LedgerBlockchainHalted's incident, which fires first (1m) and holds it back. 5m
          // rides out a member's restart.
          {
            alert: 'LedgerCouncilQuorumThin',
            expr: q.onlyExpected($._config, |||
              %(thin)s
              unless on(%(exporterInstanceLabels)s, blockchain) %(halted)s
            ||| % ($._config { thin: quorumThin($._config), halted: halted($._config) })),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A blockchain council is one member loss away from losing its quorum, as seen by this exporter.',
              description: |||
                Only {{ $value }} council members of blockchain {{ $labels.blockchain }} are up
                among the nodes polled by {{ $labels.instance }}, as seen by this exporter, no
                more than the votes a session requires. The chain still advances, so its quorum
                holds; one more member lost and no vote can pass.
              |||,
            },
          },
          // The same once a strict majority of the chain's nodes have stalled: critical, and
          // LedgerBlockchainHalted's incident (it fires first and holds this back).
          {
            alert: 'LedgerCouncilQuorumThin',
            expr: q.onlyExpected($._config, |||
              %(thin)s
              and on(%(exporterInstanceLabels)s, blockchain) %(halted)s
            ||| % ($._config { thin: quorumThin($._config), halted: halted($._config) })),
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain council has lost its margin and the chain has stopped.',
              description: |||
                Only {{ $value }} council members of blockchain {{ $labels.blockchain }} are up
                among the nodes polled by {{ $labels.instance }}, as seen by this exporter, no
                more than the votes a session requires, and a majority of the chain's nodes
                have stalled.
              |||,
            },
          },
          // A council with no margin by its own design: it has no more members than the votes
          // a session requires (3 members, 3 votes), so any member down stops the chain. Not
          // an incident (nothing changed), so info, never a page; the operator decides
          // whether the network should have a spare member. councilWithoutMarginFor (30m):
          // a council in the middle of a rotation may read so for a few cycles. The council
          // size is the majority's (as LedgerCouncilQuorumThin's), from any node that reports
          // it: no member needs to be polled.
          {
            alert: 'LedgerCouncilWithoutMargin',
            expr: q.onlyExpected($._config, |||
              %(size)s
              <= on(%(exporterInstanceLabels)s, blockchain) %(required)s
            ||| % ($._config {
              size: std.rstripChars(q.councilSize($._config.ledgerSelector, $._config.exporterInstanceLabels), '\n'),
              required: std.rstripChars(q.requiredVotes($._config.ledgerSelector, $._config.exporterInstanceLabels), '\n'),
            })),
            'for': $._config.councilWithoutMarginFor,
            labels: { severity: 'info' },
            annotations: {
              summary: 'A blockchain council has no more members than the votes a session needs.',
              description: |||
                The council of blockchain {{ $labels.blockchain }} has {{ $value }} members, as
                the nodes polled by {{ $labels.instance }} report it, no more than the votes a
                session requires: any member down stops the chain.
              |||,
            },
          },
        ],
      },
    ],
  },
}
