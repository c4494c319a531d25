// Burn-rate SLOs: the SRE workbook's multiwindow, multi-burn-rate alerts ("Alerting on SLOs",
// https://sre.google/workbook/alerting-on-slos/, its table of two pages and two tickets), as
// sloth and pyrra generate them. Each SLO is an error ratio (the share of time that was bad)
// recorded over the windows the alerts compare, and over the period its budget is spent
// in; the recording rules (slo.libsonnet), the alerts (alerts/slo.libsonnet) and the SLO
// dashboard all name the records and the factors from here.
//
// The math: the error budget is 1 - objective of the period. A burn rate is the error ratio
// over a window divided by the budget: 1 spends the budget exactly over the period, 14.4
// spends 2 % of a 30-day budget in one hour. A pair fires while both its long window (how
// much was spent: no page for a blip) and its short window (still spending now: the alert
// clears soon after the cause does) burn faster than its factor.
local q = import 'consensus.libsonnet';
local replicas = import 'replicas.libsonnet';
local utils = import 'utils.libsonnet';

// The period's budget share (in percent) each pair spends in its long window at its burn
// rate, and its `for` (pyrra's: about half the short window, so one bad evaluation does
// not page). The workbook's factors follow for a 30d period: 2 % in 1h is 14.4, 5 % in 6h
// is 6, 10 % in 1d is 3, 10 % in 3d is 1; another period keeps the shares.
local pairs = [
  { severity: 'critical', long: '1h', short: '5m', budgetPercent: 2, 'for': '2m' },
  { severity: 'critical', long: '6h', short: '30m', budgetPercent: 5, 'for': '15m' },
  { severity: 'warning', long: '1d', short: '2h', budgetPercent: 10, 'for': '1h' },
  { severity: 'warning', long: '3d', short: '6h', budgetPercent: 10, 'for': '3h' },
];

// 180000 -> '50 hours', 432000 -> '5 days': how long a budget lasts at a burn rate.
local spanText(seconds) =
  local whole = std.floor(seconds);
  if whole % 86400 == 0 then utils.plural(whole / 86400, 'day') else utils.secondsText(whole);

{
  // The windows of the error-ratio records: every long and short window of the pairs.
  windows:: ['5m', '30m', '1h', '2h', '6h', '1d', '3d'],

  pairs:: pairs,

  // A pair's burn-rate factor over `period`: its budget share spent in its long window.
  factor(pair, period)::
    pair.budgetPercent * utils.durationSeconds(period) / (100 * utils.durationSeconds(pair.long)),

  // How long the whole budget lasts at a pair's factor: '50 hours' for 14.4 over 30 days.
  exhaustion(pair, period):: spanText(utils.durationSeconds(period) / self.factor(pair, period)),

  // '1d' -> '1 day', '30m' -> '30 minutes'.
  durationText(duration):: spanText(utils.durationSeconds(duration)),

  // An objective as PromQL reads it, checked: a ratio strictly between 0 and 1.
  objective(c, key)::
    local value = c[key];
    assert std.isNumber(value) && value > 0 && value < 1 :
           '%s %s: an objective is a ratio between 0 and 1 (0.995 for 99.5 %%)' % [key, std.toString(value)];
    value,

  // An objective in percent for texts: 0.995 -> '99.5 %'.
  percentText(objective):: '%s %%' % std.toString(std.round(objective * 100000) / 1000),

  // The two SLOs. `level` and `metric` name their records level:metric:error_ratio<window>
  // (the Prometheus convention); `raw` is the error ratio of a short window from the
  // exporter's series, the period's is the mean of the 5m records (as sloth records its
  // period: one sample a rule evaluation instead of one a scrape).
  nodeAvailability(c):: {
    name: 'node availability',
    key: 'nodeAvailabilityObjective',
    objective: $.objective(c, self.key),
    level: 'node',
    metric: 'ledger_node_up',
    // With an HA pair, the share of the better-placed replica (the highest availability
    // either read): a replica cut off from the node spends no budget of the node's.
    raw(window):: '1 - %s' % replicas.range(c, 'avg_over_time', 'ledger_node_up', c.ledgerSelector, window),
    // The incidents this budget's burn belongs to, within `window` (the pair's short window):
    // the node down (LedgerNodeDown firing) or in maintenance. The burn alert says nothing
    // while one holds or held within its short window: the cause pages (or is planned), and
    // once it has ended the short window's tail (still over the factor for as long as the
    // window holds the outage) must not notify again for the same incident. A node that
    // flaps, down too briefly for LedgerNodeDown, still burns and pages.
    incident(window)::
      local by = c.exporterInstanceLabels;
      |||
        unless on(%(by)s, node) max_over_time(ALERTS{alertname="LedgerNodeDown", alertstate="firing"}[%(w)s])
        unless on(%(by)s, node) max_over_time(ledger_node_maintenance{%(s)s}[%(w)s]) == 1
      ||| % { by: by, s: c.ledgerSelector, w: window },
  },

  blockchainLiveness(c):: {
    name: 'blockchain liveness',
    key: 'blockchainLivenessObjective',
    objective: $.objective(c, self.key),
    level: 'blockchain',
    metric: 'ledger_blockchain_height',
    raw(window):: 'avg_over_time(%s{%s}[%s])' % [$.notAdvancingRecord, c.ledgerSelector, window],
    // As for node availability: the chain halted (LedgerBlockchainHalted firing) or in
    // maintenance within the pair's short window is the incident the burn belongs to.
    incident(window)::
      local by = c.exporterInstanceLabels;
      |||
        unless on(%(by)s, blockchain) max_over_time(ALERTS{alertname="LedgerBlockchainHalted", alertstate="firing"}[%(w)s])
        unless on(%(by)s, blockchain) max_over_time(ledger_blockchain_maintenance{%(s)s}[%(w)s]) == 1
      ||| % { by: by, s: c.ledgerSelector, w: window },
  },

  record(slo, window):: '%s:%s:error_ratio%s' % [slo.level, slo.metric, window],

  // 1 while a chain with work waiting does not advance on a majority of its nodes, 0 while
  // it does (or has nothing to do), per exporter and chain; no sample while no node reads it.
  // "Not advancing" on a node is LedgerBlockHeightStalled's own condition (lib/consensus
  // `stalled`), so the SLI and the stall alert cannot disagree; "its nodes" are the nodes
  // that are up and read the chain. Bad when the stalled ones are at least half of them.
  // Only for the chains the exporter expected (lib/consensus.libsonnet `expected`): a chain
  // one node makes up has no budget to burn. With an HA pair, per logical exporter: the
  // replicas folded (lib/replicas.libsonnet), each node counted once.
  notAdvancingRecord:: 'blockchain:ledger_blockchain_height:not_advancing',
  notAdvancing(c)::
    local by = c.exporterInstanceLabels;
    local s = c.ledgerSelector;
    local reading = '(%(listed)s == 1 and on(%(by)s, node) %(up)s == 1)' % {
      by: by,
      listed: replicas.read(c, 'ledger_blockchain_up', s),
      up: replicas.read(c, 'ledger_node_up', s),
    };
    |||
      (
        2 * (
          count by (%(by)s, blockchain) (
            %(stalled)s
            and on(%(by)s, node, blockchain) %(reading)s
          )
          or
          0 * count by (%(by)s, blockchain) %(reading)s
        )
        >= bool on(%(by)s, blockchain)
        count by (%(by)s, blockchain) %(reading)s
      )
      and on(%(by)s, blockchain) %(expected)s
    ||| % {
      by: by,
      reading: reading,
      stalled: std.rstripChars(q.stalled(c, s, by), '\n'),
      expected: std.rstripChars(q.expected(s, by, c.replicaLabels), '\n'),
    },

  // The rules of one SLO: its ratio over each window, then over the period.
  recordingRules(c, slo):: [
    { record: $.record(slo, window), expr: slo.raw(window) }
    for window in $.windows
  ] + [{
    record: $.record(slo, c.sloPeriod),
    expr: 'avg_over_time(%s{%s}[%s])' % [$.record(slo, '5m'), c.ledgerSelector, c.sloPeriod],
  }],

  // One alert rule's expression and labels for `pair` (index into pairs): both windows
  // burn faster than the pair's factor, and no incident the burn belongs to (the SLO's
  // `incident`) held within its short window; its value is the long window's burn rate.
  burnAlert(c, slo, index)::
    local pair = pairs[index];
    local budget = '(1 - %s)' % std.toString(slo.objective);
    local burn(window) = '%s{%s} / %s > %s' % [$.record(slo, window), c.ledgerSelector, budget, std.toString($.factor(pair, c.sloPeriod))];
    {
      expr: '%s\nand\n%s\n%s' % [burn(pair.long), burn(pair.short), slo.incident(pair.short)],
      'for': pair['for'],
      labels: { severity: pair.severity, long_window: pair.long, short_window: pair.short },
      // The pair in words, for the alert's description (after what was bad).
      pairText:: 'long enough to spend its error budget {{ $value | humanize }} times as fast as the %s objective allows over the last %s (more than %s, and still over the last %s): at a burn rate of %s, the budget (%s in %s) is gone in %s.' % [
        $.percentText(slo.objective),
        $.durationText(pair.long),
        std.toString($.factor(pair, c.sloPeriod)),
        $.durationText(pair.short),
        std.toString($.factor(pair, c.sloPeriod)),
        spanText((1 - slo.objective) * utils.durationSeconds(c.sloPeriod)),
        $.durationText(c.sloPeriod),
        $.exhaustion(pair, c.sloPeriod),
      ],
    },
}
