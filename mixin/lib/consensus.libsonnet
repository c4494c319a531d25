// PromQL shared by the alerts, the recording rules and the dashboards, written once so that
// an alert, the guard of another alert and a dashboard panel cannot drift apart. Each takes
// the selector to use (`s`: the alerts' ledgerSelector, or a dashboard's with its variables)
// and the labels that tell one exporter's series from another's (`by`: exporterInstanceLabels).
local requiredVotesWindow = '1h';

{
  // A chain whose height has not moved for longer than a block can take while work waits:
  // the chain's own txMaxTimeTrigger (a block is minted at the latest then) plus its
  // consensusTimeout (one round to agree on it) plus stallGraceSeconds; heightStalledSeconds
  // where the node reports neither setting. Never an idle chain: one that reports no pending
  // transaction and no open vote session has nothing to mint, however long it is quiet. A
  // node that reports neither count cannot be called idle. The value is the height's age.
  // In parentheses, so it can follow `unless on(...)` whole.
  stalled(c, s, by)::
    |||
      (
        (
          time() - ledger_blockchain_height_last_change_timestamp_seconds{%(s)s}
          > (
              ledger_blockchain_tx_max_time_trigger_seconds{%(s)s}
              + ledger_blockchain_consensus_timeout_seconds{%(s)s}
              + %(grace)d
            or
              0 * ledger_blockchain_height_last_change_timestamp_seconds{%(s)s} + %(fallback)d
          )
        )
        unless on(%(by)s, node, blockchain) (
          ledger_blockchain_pending_transactions{%(s)s} == 0
          and on(%(by)s, node, blockchain) ledger_blockchain_vote_sessions{%(s)s} == 0
        )
      )
    ||| % { s: s, by: by, grace: c.stallGraceSeconds, fallback: c.heightStalledSeconds },

  // A vote session open longer than voteSessionStuckTimeouts x the chain's consensusTimeout
  // (voteSessionStuckSeconds where the node reports no timeout). The value is its age.
  sessionStuck(c, s)::
    |||
      ledger_blockchain_vote_session_age_seconds{%(s)s}
      > (
          %(times)d * ledger_blockchain_consensus_timeout_seconds{%(s)s}
        or
          0 * ledger_blockchain_vote_session_age_seconds{%(s)s} + %(fallback)d
      )
    ||| % { s: s, times: c.voteSessionStuckTimeouts, fallback: c.voteSessionStuckSeconds },

  // How far back requiredVotes looks for consensusRequired (the status page reads it too,
  // mixin/status_page.libsonnet).
  requiredVotesWindow:: requiredVotesWindow,

  // Votes a session needs on each chain, per exporter: the highest consensusRequired any
  // polled node reported in the last requiredVotesWindow (sessions come and go; a chain
  // between sessions still needs them), else the highest consensus.minMembers.
  requiredVotes(s, by)::
    |||
      (
        max by (%(by)s, blockchain) (max_over_time(ledger_blockchain_vote_consensus_required{%(s)s}[%(window)s]))
        or
        max by (%(by)s, blockchain) (ledger_blockchain_consensus_min_members{%(s)s})
      )
    ||| % { s: s, by: by, window: requiredVotesWindow },

  // The size of the majority's council on each chain, per exporter: the members the nodes
  // that agree with the majority's council set report.
  councilSize(s, by)::
    |||
      max by (%(by)s, blockchain) (
        ledger_blockchain_council_members{%(s)s}
        and on(%(by)s, node, blockchain) ledger_blockchain_council_agrees{%(s)s} == 1
      )
    ||| % { s: s, by: by },

  // Chains where every member of the majority's council is a polled node: only there is a
  // member that is not up known to be down (an unpolled member is unknown, not down).
  everyMemberPolled(s, by)::
    |||
      ledger_network_blockchain_council_members_polled{%(s)s}
      >= on(%(by)s, blockchain) %(size)s
    ||| % { s: s, by: by, size: std.rstripChars($.councilSize(s, by), '\n') },

  // "A strict majority exists" for a chain, per exporter: more than half of the nodes one
  // exporter compared on the chain agree with the majority. Grouped by the labels that tell
  // exporters apart and the chain, so an HA pair of exporters or two environments in one
  // Prometheus never add up each other's nodes. A node's static labels are left out of the
  // grouping on purpose.
  majorityExists(metric, s, by)::
    '(2 * sum by (%(by)s, blockchain) (%(m)s{%(s)s}) > count by (%(by)s, blockchain) (%(m)s{%(s)s}))' % {
      by: by,
      m: metric,
      s: s,
    },
}
