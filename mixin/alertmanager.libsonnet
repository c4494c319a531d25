// The Alertmanager configuration shipped with the alerts (deploy/alertmanager/alertmanager.yml,
// rendered by tools/render_mixin.py): routes by severity, one group per exporter, chain and
// node (a ticket's per alert name too), and the inhibition tree that turns one incident into one page. The compose stack,
// the Kubernetes manifests and the Helm chart use it; docs/alerts.md ("Routing and
// inhibition") says how to merge it into an Alertmanager of your own.
local labelList(text) = std.filter(function(l) l != '', std.map(function(l) std.stripChars(l, ' '), std.split(text, ',')));

{
  alertmanagerConfig:: {
    local c = $._config,
    // The labels that tell one exporter's alerts from another's (default job, instance):
    // every inhibition requires them equal, so one exporter never silences another's.
    local exporter = labelList(c.exporterInstanceLabels),
    // The labels that tell the replicas of an HA pair apart (replicaLabels): only the alerts
    // that stay per replica carry them (mixin.perReplicaAlerts); every other alert is folded
    // and lacks them, which Alertmanager's `equal` reads as an empty value.
    local replica = labelList(c.replicaLabels),
    // Every alert of the mixin (severity none and the maintenance alerts excepted where said).
    local ledger = 'alertname=~"Ledger.+"',
    local names(list) = 'alertname=~"%s"' % std.join('|', list),
    local notNames(list) = 'alertname!~"%s"' % std.join('|', list),
    local maintenance = ['LedgerNodeInMaintenance', 'LedgerBlockchainInMaintenance'],

    route: {
      receiver: 'ledger-ticket',
      // One notification per exporter, chain and node: the alerts of one node and chain
      // arrive together, a chain-wide alert (no node label) apart from its nodes'.
      group_by: exporter + ['blockchain', 'node'],
      group_wait: '30s',
      group_interval: '5m',
      repeat_interval: '4h',
      routes: [
        // The dead man's switch: its own receiver, repeated often, so the service behind it
        // notices within minutes when it stops arriving.
        {
          receiver: 'ledger-deadmansswitch',
          matchers: ['alertname="LedgerWatchdog"'],
          group_by: ['alertname'],
          group_wait: '0s',
          group_interval: '1m',
          repeat_interval: '1m',
        },
        // An HA pair's replica cut off from nodes its twin reaches: one ticket per replica
        // (the nodes it lost listed in it), not one per node.
        {
          receiver: 'ledger-ticket',
          matchers: ['alertname="LedgerExporterReplicaNodeUnreachable"'],
          group_by: exporter + replica,
        },
        { receiver: 'ledger-page', matchers: ['severity="critical"'] },
        // A ticket waits 5 minutes before its first notification, so that a symptom firing
        // before its cause is never sent on its own (an inhibition mutes only what is sent
        // while its cause fires; an alert that resolves before its group's first
        // notification is not sent at all). A chain halts: its symptoms (a failing leader,
        // a thin quorum) stop firing as soon as the halt's condition holds (the stall
        // condition on a majority, lib/consensus.libsonnet `haltIncident`), a minute before
        // LedgerBlockchainHalted fires. LedgerLeaderFailingRounds may fire before that, for
        // a leader that had failed before, no earlier than the first failed round plus its
        // 1m: txMaxTimeTrigger + consensusTimeout + 1m after the last block, against
        // txMaxTimeTrigger + consensusTimeout + stallGrace for the condition. A gap of
        // stallGrace - 1m (2m), whatever the chain's settings, which 5 minutes covers for a
        // stallGrace up to 6m. A ticket needs no answer within the minute.
        // Tickets are grouped by alert name too: group_wait only delays a group's FIRST
        // notification, and a chain's group may already be open (another warning of the chain
        // firing, or one resolved in the last 15 minutes, which Prometheus keeps re-sending
        // resolved): a symptom joining it would go out at its next group_interval, before its
        // cause fires. In a group of its own it waits the full 5 minutes. One ticket per
        // warning of a node or chain, as a ticket queue files them.
        {
          receiver: 'ledger-ticket',
          matchers: ['severity="warning"'],
          group_by: exporter + ['alertname', 'blockchain', 'node'],
          group_wait: '5m',
        },
        // Info (maintenance, a council without margin, a contract upgraded) and none: shown
        // in Alertmanager's UI and used to inhibit, sent nowhere.
        { receiver: 'ledger-null', matchers: ['severity=~"info|none"'] },
      ],
    },

    inhibit_rules: [
      // The exporter cannot be scraped, or reaches none of its nodes: every other ledger
      // alert of that exporter is a consequence (the Watchdog, with no exporter labels,
      // never is).
      {
        source_matchers: ['alertname="LedgerExporterDown"'],
        target_matchers: [ledger, notNames(['LedgerExporterDown', 'LedgerWatchdog'])],
        equal: exporter,
      },
      // One replica of an HA pair down (its twin up: a ticket): only that replica's own
      // alerts, those that stay per replica, labelled with it. The folded alerts carry no
      // replica label, which never equals the down replica's, so the pair's alerts about
      // nodes and chains, which the twin still raises, are never held back.
      {
        source_matchers: ['alertname="LedgerExporterReplicaDown"'],
        target_matchers: [names(std.filter(function(name) name != 'LedgerExporterReplicaDown', $.perReplicaAlerts))],
        equal: exporter + replica,
      },
      {
        source_matchers: ['alertname="LedgerAllNodesDown"'],
        target_matchers: [ledger, notNames(['LedgerExporterDown', 'LedgerAllNodesDown', 'LedgerWatchdog'])],
        equal: exporter,
      },
      // A chain halted (a strict majority of its nodes stalled): its per-node stall,
      // vote-session, vote-round, leader, queue and lag alerts, the quorum alerts of a chain
      // that has stopped, and its liveness budget's burn are that one incident.
      {
        source_matchers: ['alertname="LedgerBlockchainHalted"'],
        target_matchers: [names([
          'LedgerBlockHeightStalled',
          'LedgerVoteSessionStuck',
          'LedgerVoteRoundsEscalating',
          'LedgerLeaderFailingRounds',
          'LedgerPendingMessagesHigh',
          'LedgerDelayedMessagesHigh',
          'LedgerNodeBehind',
          'LedgerCouncilQuorumThin',
          'LedgerCouncilBelowMinMembers',
          'LedgerBlockchainLivenessBudgetBurn',
        ])],
        equal: exporter + ['blockchain'],
      },
      // A node down: the alerts of its chains (anything labelled with the node and a chain),
      // and its availability budget's burn.
      {
        source_matchers: ['alertname="LedgerNodeDown"'],
        target_matchers: [ledger, 'blockchain=~".+"'],
        equal: exporter + ['node'],
      },
      {
        source_matchers: ['alertname="LedgerNodeDown"'],
        target_matchers: ['alertname="LedgerNodeAvailabilityBudgetBurn"'],
        equal: exporter + ['node'],
      },
      // A node down explains a thin quorum margin, a chain-wide alert without a node label:
      // every one of its exporter's (Alertmanager cannot tell which chains the node reads).
      // A down node cannot hide a real loss this way: a chain that stops because of it
      // pages as LedgerBlockchainHalted, which no node's alert holds back.
      {
        source_matchers: ['alertname="LedgerNodeDown"'],
        target_matchers: ['alertname="LedgerCouncilQuorumThin"'],
        equal: exporter,
      },
      // Another node answers at a node's URL: the node reads as down (its answers are not
      // trusted), one incident with the mismatch.
      {
        source_matchers: ['alertname="LedgerNodeIdentityMismatch"'],
        target_matchers: ['alertname="LedgerNodeDown"'],
        equal: exporter + ['node'],
      },
      // A budget burning fast pages; its slow pair's ticket for the same node or chain is
      // the same burn, seen later.
      {
        source_matchers: ['alertname=~"LedgerNodeAvailabilityBudgetBurn|LedgerBlockchainLivenessBudgetBurn"', 'severity="critical"'],
        target_matchers: ['alertname=~"LedgerNodeAvailabilityBudgetBurn|LedgerBlockchainLivenessBudgetBurn"', 'severity="warning"'],
        equal: exporter + ['alertname', 'node', 'blockchain'],
      },
      // The network partitioned (no group holds a majority, at least two nodes outside the
      // largest: never one node's doing): a node with fewer peers, or cut off alone, is part
      // of it.
      {
        source_matchers: ['alertname="LedgerNetworkPartitioned"'],
        target_matchers: [names(['LedgerNodePeersLow', 'LedgerNodeIsolated'])],
        equal: exporter,
      },
      // A fork (no majority, or two nodes or more off it: never one node's doing): nodes on
      // different histories disagree on the watched contracts and wallets as a consequence.
      {
        source_matchers: ['alertname="LedgerBlockchainForked"'],
        target_matchers: [names(['LedgerWatchedContractNodesDisagree', 'LedgerWatchedWalletNodesDisagree'])],
        equal: exporter + ['blockchain'],
      },
      // Planned maintenance: every other alert of the node, or of the chain.
      {
        source_matchers: ['alertname="LedgerNodeInMaintenance"'],
        target_matchers: [ledger, notNames(maintenance)],
        equal: exporter + ['node'],
      },
      {
        source_matchers: ['alertname="LedgerBlockchainInMaintenance"'],
        target_matchers: [ledger, notNames(maintenance)],
        equal: exporter + ['blockchain'],
      },
    ],

    receivers: [
      { name: 'ledger-page', webhook_configs: [{ url: c.alertmanagerWebhooks.page, send_resolved: true }] },
      { name: 'ledger-ticket', webhook_configs: [{ url: c.alertmanagerWebhooks.ticket, send_resolved: true }] },
      { name: 'ledger-deadmansswitch', webhook_configs: [{ url: c.alertmanagerWebhooks.deadMansSwitch, send_resolved: false }] },
      { name: 'ledger-null' },
    ],
  },
}
