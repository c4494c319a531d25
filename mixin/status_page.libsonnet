// What the exporter's status page needs of the alerts it mirrors (exporter/web/problems.py
// lists a problem by the same threshold as its alert): the settings of _config it applies,
// and the few fixed values of the alerts' PromQL. tools/render_mixin.py writes them, with each
// alert's severity taken from the rendered rules, to exporter/rules/thresholds.json; and
// each alert's `for` (statusPageFor), so the page says when a problem it lists will fire.
//
// Every value is a number. The rule for durations: a key ending in `Seconds` is in seconds;
// each duration of _config (a Prometheus duration, '3m') is converted here, by
// utils.durationSeconds (the conversion the alerts' summaries use), its key given the suffix
// `Seconds` (stallGrace -> stallGraceSeconds): the file's keys stay as they were when
// _config still held plain seconds, so the exporter's reader (exporter/web/) is unchanged.
local q = import 'lib/consensus.libsonnet';
local utils = import 'lib/utils.libsonnet';

{
  statusPageThresholds:: {
    local c = $._config,
    // LedgerBlockHeightStalled, and the stall guard of LedgerNodeBehind
    stallGraceSeconds: utils.durationSeconds(c.stallGrace),
    heightStalledSeconds: utils.durationSeconds(c.heightStalled),
    // LedgerNodeBehind
    blocksBehindThreshold: c.blocksBehindThreshold,
    // LedgerNodeBehindTime
    behindTimeSeconds: utils.durationSeconds(c.behindTime),
    // LedgerBlockchainSyncingTooLong: its `for`
    syncingTooLongSeconds: utils.durationSeconds(c.syncingTooLongFor),
    // LedgerVoteSessionStuck
    voteSessionStuckTimeouts: c.voteSessionStuckTimeouts,
    voteSessionStuckSeconds: utils.durationSeconds(c.voteSessionStuck),
    // LedgerLeaderFailingRounds
    leaderFailedRoundsThreshold: c.leaderFailedRoundsThreshold,
    leaderFailedRoundsWindowSeconds: utils.durationSeconds(c.leaderFailedRoundsWindow),
    // LedgerCouncilQuorumThin: the votes required, from the last window of consensusRequired
    requiredVotesWindowSeconds: utils.durationSeconds(q.requiredVotesWindow),
    // LedgerNodePeersLow, LedgerPendingMessagesHigh, LedgerDelayedMessagesHigh,
    // LedgerVoteRoundsEscalating
    peersLowThreshold: c.peersLowThreshold,
    pendingMessagesThreshold: c.pendingMessagesThreshold,
    delayedMessagesThreshold: c.delayedMessagesThreshold,
    voteRoundThreshold: c.voteRoundThreshold,
    // LedgerNodeCertificateExpiring: critical under the first, warning under the second
    certExpiryCriticalSeconds: utils.durationSeconds(c.certExpiryCritical),
    certExpiryWarningSeconds: utils.durationSeconds(c.certExpiryWarning),
  },
  // Each alert's `for` in seconds, read from the rules themselves (never restated): the
  // status page lists a problem as pending until its condition has held this long. An alert
  // of several rules (a burn rate's window pairs) fires with its shortest `for`.
  statusPageFor:: local rules = [
    rule
    for group in $.prometheusAlerts.groups
    for rule in group.rules
    if std.objectHas(rule, 'alert')
  ]; {
    [name]: std.foldl(
      std.min,
      [utils.durationSeconds(std.get(rule, 'for', '0s')) for rule in rules if rule.alert == name],
      std.pow(2, 53),
    )
    for name in std.set([rule.alert for rule in rules])
  },
  // The alerts of two rules split by the halt (lib/consensus.libsonnet `halted`): one rule
  // `unless` the chain is halted, one `and` it is, each of its own severity (the council
  // alerts: a warning while the chain advances, critical once it has stopped). Read from the
  // rules' own expressions, so the page shows the severity of the rule that holds; an alert
  // whose rules do not split so is not listed (its one severity is in `severities`).
  statusPageByHalt:: local c = $._config;
    local halted = std.rstripChars(q.halted(c, c.ledgerSelector, c.exporterInstanceLabels), '\n');
    local on = 'on(%s, blockchain) %s' % [c.exporterInstanceLabels, halted];
    // std.strReplace is native (std.findSubstr is not, and too slow over every rule)
    local has(expr, text) = std.strReplace(expr, text, '') != expr;
    local split = [
      { alert: rule.alert, severity: rule.labels.severity, side: side }
      for group in $.prometheusAlerts.groups
      for rule in group.rules
      if std.objectHas(rule, 'alert') && has(rule.expr, halted)
      for side in ['advancing', 'halted']
      if has(rule.expr, (if side == 'halted' then 'and ' else 'unless ') + on)
    ];
    local of(name, side) = [rule.severity for rule in split if rule.alert == name && rule.side == side];
    {
      [name]: { advancing: of(name, 'advancing')[0], halted: of(name, 'halted')[0] }
      for name in std.set([rule.alert for rule in split])
      if std.length(of(name, 'advancing')) == 1 && std.length(of(name, 'halted')) == 1
    },
}
