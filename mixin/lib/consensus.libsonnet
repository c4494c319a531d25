// PromQL shared by the alerts, the recording rules and the dashboards, written once so that
// an alert, the guard of another alert and a dashboard panel cannot drift apart. Each takes
// the selector to use (`s`: the alerts' ledgerSelector, or a dashboard's with its variables)
// and the labels that tell one exporter's series from another's (`by`: exporterInstanceLabels).
// Every raw series is read folded over the replicas of an HA pair (lib/replicas.libsonnet,
// _config.replicaLabels: `c`, or `r` where a function takes no config; its default is the
// mixin's default), so what follows sees one series per logical exporter, node and chain.
local replicas = import 'replicas.libsonnet';
local utils = import 'utils.libsonnet';
local defaultReplicas = (import '../config.libsonnet')._config.replicaLabels;
local requiredVotesWindow = '1h';

{
  // A chain whose height has not moved for longer than a block can take while work waits:
  // the chain's own txMaxTimeTrigger (a block is minted at the latest then) plus its
  // consensusTimeout (one round to agree on it) plus stallGrace; heightStalled
  // where the node reports neither setting. Never an idle chain: one that reports no pending
  // transaction and no open vote session has nothing to mint, however long it is quiet. A
  // node that reports neither count cannot be called idle. The value is the height's age.
  // In parentheses, so it can follow `unless on(...)` whole.
  // Two replicas stall a chain when they agree: the age is from the most recent height
  // change any replica saw (max of the timestamps), and the work waiting is what both saw
  // (min of the counts: idle as soon as one replica read no work).
  stalled(c, s, by)::
    local lastChange = replicas.read(c, 'ledger_blockchain_height_last_change_timestamp_seconds', s);
    |||
      (
        (
          time() - %(lastChange)s
          > (
              %(trigger)s
              + %(timeout)s
              + %(grace)d
            or
              0 * %(lastChange)s + %(fallback)d
          )
        )
        unless on(%(by)s, node, blockchain) (
          %(pending)s == 0
          and on(%(by)s, node, blockchain) %(sessions)s == 0
        )
      )
    ||| % {
      by: by,
      lastChange: lastChange,
      trigger: replicas.read(c, 'ledger_blockchain_tx_max_time_trigger_seconds', s),
      timeout: replicas.read(c, 'ledger_blockchain_consensus_timeout_seconds', s),
      pending: replicas.read(c, 'ledger_blockchain_pending_transactions', s, 'min'),
      sessions: replicas.read(c, 'ledger_blockchain_vote_sessions', s, 'min'),
      grace: utils.durationSeconds(c.stallGrace),
      fallback: utils.durationSeconds(c.heightStalled),
    },

  // A node up: any replica reaches it (a node is down only when no replica reaches it).
  nodeUp(s, r=defaultReplicas):: replicas.read(r, 'ledger_node_up', s),

  // The up nodes of one exporter that read a chain (its height this cycle), per node and
  // chain: the electorate of every majority below. In parentheses.
  reading(s, by, r=defaultReplicas)::
    '(%(height)s and on(%(by)s, node) %(up)s == 1)' % {
      by: by,
      height: replicas.read(r, 'ledger_blockchain_height', s),
      up: $.nodeUp(s, r),
    },

  // A chain halted, per exporter: a strict majority of the up nodes that read it meet
  // `stalled`, whatever height each stands at. The value is how many. One node (stuck, or
  // with a height that keeps rising, however high) is never a majority of a network of
  // three or more, so it can neither cause a halt nor hide one; LedgerBlockHeightStalled
  // names it alone. LedgerBlockchainHalted, the critical quorum alerts and the status page
  // read this.
  halted(c, s, by)::
    |||
      (
        count by (%(by)s, blockchain) (
          %(stalled)s
          and on(%(by)s, node, blockchain) %(reading)s
        )
        > on(%(by)s, blockchain)
        count by (%(by)s, blockchain) %(reading)s / 2
      )
    ||| % { by: by, reading: $.reading(s, by, c.replicaLabels), stalled: std.rstripChars($.stalled(c, s, by), '\n') },

  // LedgerBlockchainHalted fired within `window`, per exporter and chain (its ALERTS series,
  // which carries the exporter's labels and `blockchain`, and no replica label: the alert is
  // folded). In parentheses.
  haltFiredWithin(window)::
    '(max_over_time(ALERTS{alertname="LedgerBlockchainHalted", alertstate="firing"}[%s]))' % window,

  // A halt as the one incident its symptoms belong to, per exporter and chain: the chain
  // halted now (`halted`: the halt's condition without its `for`, so from before
  // LedgerBlockchainHalted fires), or, given a `window`, LedgerBlockchainHalted fired within
  // it (the halt's tail: a vote session opened, rounds counted or failed during the halt
  // outlive it by a little). The chain-level symptoms of a halt (a stuck session, escalating
  // rounds, a failing leader, a thin quorum's warning, a node's stall, its piling messages)
  // take `unless on(exporterInstanceLabels, blockchain)` this: they never fire on their own
  // while the chain is halted, so a symptom that fired before the halt's condition held
  // resolves then, before Alertmanager's group_wait sends it, and none notifies after the
  // recovery for the same incident. A chain that is not halted keeps them all. In parentheses.
  haltIncident(c, s, by, window=null)::
    if window == null then std.rstripChars($.halted(c, s, by), '\n')
    else '(\n%s\nor on(%s, blockchain) %s\n)' % [std.rstripChars($.halted(c, s, by), '\n'), by, $.haltFiredWithin(window)],

  // The chains an exporter expected, per exporter and chain: those that at least two of its
  // up nodes list (ledger_blockchain_up, read or not), and every chain of an exporter with
  // fewer than two up nodes (a network of one node pages for its chains). A chain that only
  // one node lists, beside other up nodes, is that node's doing: LedgerNodeUnexpectedBlockchains
  // says so once (ledger_node_unexpected_blockchains), and nothing about such a chain pages,
  // however many a hostile node makes up. Every alert about a chain takes `and on(by,
  // blockchain)` this.
  expected(s, by, r=defaultReplicas)::
    local listing = '(%(listed)s and on(%(by)s, node) %(up)s == 1)' % {
      by: by,
      listed: replicas.read(r, 'ledger_blockchain_up', s),
      up: $.nodeUp(s, r),
    };
    |||
      (
        count by (%(by)s, blockchain) %(listing)s > 1
        or on(%(by)s, blockchain)
        (
          count by (%(by)s, blockchain) %(listing)s
          unless on(%(by)s) count by (%(by)s) (%(up)s == 1) > 1
        )
      )
    ||| % { by: by, listing: listing, up: $.nodeUp(s, r) },

  // `expr`, an alert's whole condition about a chain (labelled with the exporter's labels
  // and `blockchain`), kept only for the chains the exporter expected (`expected`).
  onlyExpected(c, expr)::
    '(\n%s\n)\nand on(%s, blockchain) %s' % [
      std.rstripChars(expr, '\n'),
      c.exporterInstanceLabels,
      std.rstripChars($.expected(c.ledgerSelector, c.exporterInstanceLabels, c.replicaLabels), '\n'),
    ],

  // A vote session open longer than voteSessionStuckTimeouts x the chain's consensusTimeout
  // (voteSessionStuck where the node reports no timeout). The value is its age: the
  // youngest any replica read (both replicas must see the session that old).
  sessionStuck(c, s)::
    local age = replicas.read(c, 'ledger_blockchain_vote_session_age_seconds', s, 'min');
    |||
      %(age)s
      > (
          %(times)d * %(timeout)s
        or
          0 * %(age)s + %(fallback)d
      )
    ||| % {
      age: age,
      timeout: replicas.read(c, 'ledger_blockchain_consensus_timeout_seconds', s),
      times: c.voteSessionStuckTimeouts,
      fallback: utils.durationSeconds(c.voteSessionStuck),
    },

  // How far back requiredVotes looks for consensusRequired (the status page reads it too,
  // mixin/status_page.libsonnet).
  requiredVotesWindow:: requiredVotesWindow,

  // Votes a session needs on each chain, per exporter: the highest consensusRequired any
  // polled node reported in the last requiredVotesWindow (sessions come and go; a chain
  // between sessions still needs them), else the highest consensus.minMembers. `max by`
  // folds the replicas too (the highest either read).
  requiredVotes(s, by)::
    |||
      (
        max by (%(by)s, blockchain) (max_over_time(ledger_blockchain_vote_consensus_required{%(s)s}[%(window)s]))
        or
        max by (%(by)s, blockchain) (ledger_blockchain_consensus_min_members{%(s)s})
      )
    ||| % { s: s, by: by, window: requiredVotesWindow },

  // The size of the majority's council on each chain, per exporter: the members the nodes
  // that agree with the majority's council set report (`max by` folds the replicas).
  councilSize(s, by)::
    |||
      max by (%(by)s, blockchain) (
        ledger_blockchain_council_members{%(s)s}
        and on(%(by)s, node, blockchain) ledger_blockchain_council_agrees{%(s)s} == 1
      )
    ||| % { s: s, by: by },

  // Chains where every member of the majority's council is a polled node: only there is a
  // member that is not up known to be down (an unpolled member is unknown, not down).
  everyMemberPolled(s, by, r=defaultReplicas)::
    |||
      %(polled)s
      >= on(%(by)s, blockchain) %(size)s
    ||| % {
      by: by,
      polled: replicas.read(r, 'ledger_network_blockchain_council_members_polled', s),
      size: std.rstripChars($.councilSize(s, by), '\n'),
    },

  // "A strict majority exists" for a chain, per exporter: more than half of the nodes one
  // exporter compared on the chain agree with the majority. Grouped by the labels that tell
  // exporters apart and the chain, so an HA pair of exporters or two environments in one
  // Prometheus never add up each other's nodes. A node's static labels are left out of the
  // grouping on purpose. The replicas of a pair are folded first (a node agrees when either
  // replica read it agreeing), so each node counts once.
  majorityExists(metric, s, by, r=defaultReplicas)::
    local m = replicas.read(r, metric, s);
    '(2 * sum by (%(by)s, blockchain) (%(m)s) > count by (%(by)s, blockchain) (%(m)s))' % { by: by, m: m },
}
