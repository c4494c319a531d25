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
//   setting                      default  alert(s)
//   ---------------------------  -------  ------------------------------------------------
//   exporterJobSelector          job=...  LedgerExporterDown, LedgerExporterAbsent,
//                                         LedgerExporterConfigReloadFailed
//   ledgerJobSelector            job=~... every other alert, the recording rules
//   scrapeErrorsThreshold        3        LedgerNodeScrapeErrors (per 5m window, for 15m)
//   peersLowThreshold            2        LedgerNodePeersLow (LedgerNodePeersLost: 0 peers)
//   stallGraceSeconds            180      LedgerBlockHeightStalled (and the stall guard of
//                                         LedgerNodeBehind, the same condition): the height
//                                         may stay for the chain's txMaxTimeTrigger +
//                                         consensusTimeout + this, while work waits
//   heightStalledSeconds         600      the same, where the node reports neither setting
//   blocksBehindThreshold        10       LedgerNodeBehind (min over 5m, for 5m)
//   syncingTooLongFor            30m      LedgerBlockchainSyncingTooLong
//   pendingMessagesThreshold     1000     LedgerPendingMessagesHigh (for 10m)
//   delayedMessagesThreshold     100      LedgerDelayedMessagesHigh (for 10m)
//   voteRoundThreshold           3        LedgerVoteRoundsEscalating (for 5m)
//   voteSessionStuckTimeouts     5        LedgerVoteSessionStuck: the oldest session open
//                                         longer than this many consensusTimeouts (for 2m)
//   voteSessionStuckSeconds      600      the same, where the node reports no timeout
//   leaderFailedRoundsThreshold  3        LedgerLeaderFailingRounds: a leader's failed rounds
//   leaderFailedRoundsWindow     15m      in this window, on any polled node (for 1m)
//   probeStalledWindow           10m      LedgerProbeBlockHeightStalled
//   contractChangedWindow        15m      LedgerWatchedContractChanged (info)
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
    stallGraceSeconds: 180,
    heightStalledSeconds: 600,
    blocksBehindThreshold: 10,
    syncingTooLongFor: '30m',
    pendingMessagesThreshold: 1000,
    delayedMessagesThreshold: 100,
    voteRoundThreshold: 3,
    voteSessionStuckTimeouts: 5,
    voteSessionStuckSeconds: 600,
    leaderFailedRoundsThreshold: 3,
    leaderFailedRoundsWindow: '15m',
    probeStalledWindow: '10m',
    contractChangedWindow: '15m',
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
