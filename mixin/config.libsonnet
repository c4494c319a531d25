// The mixin's settings. Override any of them in your own jsonnet:
//
//   (import 'ledger-exporter/mixin/mixin.libsonnet') + {
//     _config+:: {
//       exporterJobSelector: 'job="ledger"',
//       extraSelector: 'cluster="prod"',
//       runbookURLPattern: 'https://wiki.example.com/ledger/runbooks#%s',
//     },
//   }
//
// Every threshold an operator is expected to tune is here, with the alert that uses it; the
// comment above each alert (alerts/*.libsonnet) explains its value and its `for`.
//
// One rule for values: every duration is a Prometheus duration string ('3m', '1h30m', '14d')
// under a key without a unit (stallGrace, not stallGraceSeconds); every number is a count or
// a ratio. `tools/render_mixin.py --config` refuses an override of another type, or a key
// that is not here, in one line naming it.
//
//   setting                      default  alert(s)
//   ---------------------------  -------  ------------------------------------------------
//   exporterJobSelector          job=...  LedgerExporterDown, LedgerExporterAbsent,
//                                         LedgerExporterConfigReloadFailed
//   ledgerJobSelector            job=~... every other alert, the recording rules
//   scrapeErrorsThreshold        3        LedgerNodeScrapeErrors (per 5m window, for 15m)
//   peersLowThreshold            2        LedgerNodePeersLow (LedgerNodePeersLost: 0 peers)
//   stallGrace                   3m       LedgerBlockHeightStalled (and the stall guard of
//                                         LedgerNodeBehind, the same condition): the height
//                                         may stay for the chain's txMaxTimeTrigger +
//                                         consensusTimeout + this, while work waits
//   heightStalled                10m      the same, where the node reports neither setting
//   blocksBehindThreshold        10       LedgerNodeBehind (min over 5m, for 5m)
//   behindTime                   5m       LedgerNodeBehindTime: seconds behind (for 5m)
//   reorgWindow                  15m      LedgerBlockchainReorganized: a rise in this window
//   syncingTooLongFor            30m      LedgerBlockchainSyncingTooLong
//   pendingMessagesThreshold     1000     LedgerPendingMessagesHigh (for 10m)
//   delayedMessagesThreshold     100      LedgerDelayedMessagesHigh (for 10m)
//   voteRoundThreshold           3        LedgerVoteRoundsEscalating (for 5m)
//   voteSessionStuckTimeouts     5        LedgerVoteSessionStuck: the oldest session open
//                                         longer than this many consensusTimeouts (for 2m)
//   voteSessionStuck             10m      the same, where the node reports no timeout
//   leaderFailedRoundsThreshold  3        LedgerLeaderFailingRounds: a leader's failed rounds
//   leaderFailedRoundsWindow     15m      in this window, on any polled node (for 1m)
//   probeStalledWindow           10m      LedgerProbeBlockHeightStalled
//   contractChangedWindow        15m      LedgerWatchedContractChanged (info)
//   nodeAvailabilityObjective    0.995    LedgerNodeAvailabilityBudgetBurn: the share of
//                                         the period each node answers (ledger_node_up)
//   blockchainLivenessObjective  0.995    LedgerBlockchainLivenessBudgetBurn: the share of
//                                         the period each chain with work waiting advances
//                                         on a majority of its nodes
//   sloPeriod                    30d      both: the period the error budget is spent over
//                                         (the burn-rate factors follow from it, lib/slo)
//   versionDriftFor              12h      LedgerNodeVersionDrift: more than one nodeVersion
//                                         among a job's nodes for this long
//   minimumNodeVersion           ''       LedgerNodeVersionBelowMinimum: a dotted version
//                                         ('1.4.2'); empty: the alert is not rendered
//   cycleNearTimeoutRatio        0.8      LedgerExporterCycleNearTimeout: every cycle of
//                                         the last 10m took this share of scrape_timeout
//   councilWithoutMarginFor      30m      LedgerCouncilWithoutMargin (info)
//   certExpiryWarning            14d      LedgerNodeCertificateExpiring, warning: the node's
//                                         certificate chain expires within this
//   certExpiryCritical           3d       LedgerNodeCertificateExpiring, critical
//
// An alert not in this table has no setting: what it detects fixes its condition (more than
// one block at the checkpoint, a node down), and the comment above it (alerts/*.libsonnet)
// says why its `for`. docs/alerts.md lists every alert with its severity and `for`.
{
  _config+:: {
    assert self.exporterJobSelector != '' && self.ledgerJobSelector != '' :
           'exporterJobSelector and ledgerJobSelector must select something (e.g. job="...")',

    // Selects the exporter's own targets (its /metrics: `up`, build info, config reload,
    // process metrics). The Prometheus Operator names the job after the Service.
    exporterJobSelector: 'job="ledger-exporter"',

    // Selects the targets that carry the ledger series: the daemon's /metrics and probe
    // mode's /probe scrapes (deploy/prometheus/probe.yml's job `ledger-probe`).
    ledgerJobSelector: 'job=~"ledger-exporter|ledger-probe"',

    // Matchers added to every selector of every alert, rule and dashboard query, e.g.
    // 'cluster="prod"' when several environments share one Prometheus. Empty: none.
    extraSelector: '',

    // The labels that tell one exporter's series from another's: the cross-node alerts
    // (LedgerNodeOffMajorityBlock, LedgerNodeOffMajorityCouncil, LedgerNodeOffMajorityConsensus,
    // LedgerCouncilQuorumThin, LedgerLeaderFailingRounds) count a chain's nodes per exporter,
    // never across an HA pair or two environments. Add the label that tells your
    // environments apart (e.g. 'job, instance, cluster') if they share job and instance names.
    exporterInstanceLabels: 'job, instance',

    // The labels that tell the replicas of ONE logical exporter apart (an HA pair: two
    // exporters polling the same nodes, docs/deployment.md "High availability"). Both
    // replicas' targets carry the same exporterInstanceLabels (the pair's `instance`, set as
    // a target label in static_configs or by the ServiceMonitor's relabeling) and a distinct
    // `exporter_replica` (a/b, or the pod's name). Every alert, recording rule and dashboard
    // query folds these labels away (max/min without them, lib/replicas.libsonnet), so the
    // rest of each expression sees one series per logical exporter: a node is down only when
    // no replica reaches it, a chain halted when the replicas agree it is. The exporter's own
    // alerts (its cycles, reloads, state file, certificate) stay per replica and carry the
    // label. A comma-separated list like exporterInstanceLabels. On a single exporter (no
    // such label) the fold is a no-op.
    replicaLabels: 'exporter_replica',

    // The full selectors the alerts, rules and dashboards use.
    exporterSelector: std.join(', ', std.filter(function(s) s != '', [self.exporterJobSelector, self.extraSelector])),
    ledgerSelector: std.join(', ', std.filter(function(s) s != '', [self.ledgerJobSelector, self.extraSelector])),

    // Each alert's runbook_url: this pattern with `%s` replaced by the alert's name in lower
    // case. The default points at the alert's runbook section in the project's
    // docs/alerts.md; point it at your own copy or wiki if you publish one.
    runbookURLPattern: 'https://github.com/ledger-exporter/ledger-exporter/blob/main/docs/alerts.md#%s',

    // Alert thresholds (see the table above).
    scrapeErrorsThreshold: 3,
    peersLowThreshold: 2,
    stallGrace: '3m',
    heightStalled: '10m',
    blocksBehindThreshold: 10,
    behindTime: '5m',
    reorgWindow: '15m',
    syncingTooLongFor: '30m',
    pendingMessagesThreshold: 1000,
    delayedMessagesThreshold: 100,
    voteRoundThreshold: 3,
    voteSessionStuckTimeouts: 5,
    voteSessionStuck: '10m',
    leaderFailedRoundsThreshold: 3,
    leaderFailedRoundsWindow: '15m',
    probeStalledWindow: '10m',
    contractChangedWindow: '15m',
    versionDriftFor: '12h',
    minimumNodeVersion: '',
    cycleNearTimeoutRatio: 0.8,
    councilWithoutMarginFor: '30m',

    // The shipped Alertmanager config (deploy/alertmanager/alertmanager.yml, see
    // alertmanager.libsonnet): the webhook each receiver posts to. Placeholders: replace
    // them with your paging service, ticket queue and dead man's switch (docs/alerts.md).
    alertmanagerWebhooks: {
      page: 'http://ledger-alerts.invalid/page',
      ticket: 'http://ledger-alerts.invalid/ticket',
      deadMansSwitch: 'http://ledger-alerts.invalid/watchdog',
    },

    // Service level objectives (lib/slo.libsonnet, alerts/slo.libsonnet, the SLO dashboard),
    // ratios of the period. The budget is 1 - objective: 0.995 leaves 0.5 %, 3.6 hours in 30
    // days.
    // A node: the network keeps working with one node out (the council's quorum margin), so a
    // node may be down for an upgrade and a restart or two a month (3.6 h) without harm;
    // 99.9 % (43 minutes) would page for one slow upgrade. A node down 1 minute in every
    // hour, never long enough for LedgerNodeDown's 2m, spends 1.7 % of its time down: 3.3
    // times the budget, a ticket within a day.
    nodeAvailabilityObjective: 0.995,
    // A chain: its time counts as bad only once LedgerBlockHeightStalled's condition holds
    // on at least half of its nodes (a block overdue by txMaxTimeTrigger + consensusTimeout +
    // stallGrace while work waits), so the grace is already spent before the budget is
    // touched; 3.6 hours of halts a month is what the workbook's fast pair can tell from a
    // stall the stall alert already pages for: a halt of ~5 minutes over the grace in an hour
    // pages, stalls of a few minutes a day open a ticket.
    blockchainLivenessObjective: 0.995,
    // The period both budgets are spent over: the workbook's 30 days (a calendar month's
    // length, so a monthly report and the dashboard's "budget left" agree).
    sloPeriod: '30d',
    certExpiryWarning: '14d',
    certExpiryCritical: '3d',

    // Dashboards.
    dashboardTitlePrefix: 'Ledger / ',
    dashboardTags: ['ledger', 'ledger-exporter'],
    dashboardRefresh: '30s',
    dashboardTimezone: 'browser',
    dashboardTimeFrom: 'now-6h',
  },
}
