// Burn-rate SLO alerts (lib/slo.libsonnet has the math; slo.libsonnet records the error
// ratios these read, so they need rules.yml loaded beside alerts.yml). Each alert is four
// rules, the SRE workbook's two pages and two tickets, labelled with their window pair
// (long_window, short_window) as pyrra labels them: a pair fires while both its windows spend
// the error budget faster than its factor, unless the incident the burn belongs to (the node
// down or in maintenance, the chain halted or in maintenance: lib/slo.libsonnet `incident`)
// held within its short window. That incident pages once; without this, the short window's
// tail would notify it again after its recovery, once its inhibition had ended. The factors below are for the default sloPeriod
// (30d); another period keeps each pair's share of the budget.
local slo = import '../lib/slo.libsonnet';

// The rule of `pair` (index into slo.pairs) for an SLO, its description opening with `what`.
local rule(c, s, pair, what) =
  local burn = slo.burnAlert(c, s, pair);
  burn {
    annotations: {
      summary: 'The %s error budget is spent too fast.' % s.name,
      description: '%s %s' % [what, burn.pairText],
    },
  };

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-slo',
        rules: [
          // Fast burn, page: 2 % of the 30-day budget spent in 1h (14.4 times the budget rate) and still
          // spent in the last 5m. A node down for about 5 minutes pages; `for: 2m` (pyrra's, half the
          // short window) keeps one bad evaluation from paging. A node that flaps, never down for
          // LedgerNodeDown's 2m, pages here.
          {
            alert: 'LedgerNodeAvailabilityBudgetBurn',
          } + rule($._config, slo.nodeAvailability($._config), 0, 'Ledger node {{ $labels.node }} (exporter {{ $labels.instance }}) has been down'),
          // Fast burn, page: 5 % of the budget in 6h (6 times the rate) and in the last 30m: a
          // node down about 11 minutes in 6 hours, in pieces too short for LedgerNodeDown. `for: 15m`.
          {
            alert: 'LedgerNodeAvailabilityBudgetBurn',
          } + rule($._config, slo.nodeAvailability($._config), 1, 'Ledger node {{ $labels.node }} (exporter {{ $labels.instance }}) has been down'),
          // Slow burn, ticket: 10 % of the budget in 1d (3 times the rate) and in the last 2h: the
          // budget would be gone in 10 days. `for: 1h`: a ticket can wait, a flap must not open one.
          {
            alert: 'LedgerNodeAvailabilityBudgetBurn',
          } + rule($._config, slo.nodeAvailability($._config), 2, 'Ledger node {{ $labels.node }} (exporter {{ $labels.instance }}) has been down'),
          // Slow burn, ticket: 10 % of the budget in 3d (the budget's own rate) and in the last 6h:
          // the budget would be gone by the period's end. `for: 3h`.
          {
            alert: 'LedgerNodeAvailabilityBudgetBurn',
          } + rule($._config, slo.nodeAvailability($._config), 3, 'Ledger node {{ $labels.node }} (exporter {{ $labels.instance }}) has been down'),
          // Fast burn, page: a chain halted on at least half of its nodes for about 4 minutes past
          // the stall condition (itself past txMaxTimeTrigger + consensusTimeout + stallGrace) in an
          // hour, still halted in the last 5m: 14.4 times the budget rate. `for: 2m`.
          {
            alert: 'LedgerBlockchainLivenessBudgetBurn',
          } + rule($._config, slo.blockchainLiveness($._config), 0, 'Blockchain {{ $labels.blockchain }} (exporter {{ $labels.instance }}) has stalled on at least half of its nodes while work waited'),
          // Fast burn, page: halts adding up to 11 minutes in 6h, one in the last 30m (6 times the
          // rate): a chain that keeps halting and recovering. `for: 15m`.
          {
            alert: 'LedgerBlockchainLivenessBudgetBurn',
          } + rule($._config, slo.blockchainLiveness($._config), 1, 'Blockchain {{ $labels.blockchain }} (exporter {{ $labels.instance }}) has stalled on at least half of its nodes while work waited'),
          // Slow burn, ticket: halts adding up to 22 minutes in a day, one in the last 2h (3 times
          // the rate): the budget gone in 10 days. `for: 1h`.
          {
            alert: 'LedgerBlockchainLivenessBudgetBurn',
          } + rule($._config, slo.blockchainLiveness($._config), 2, 'Blockchain {{ $labels.blockchain }} (exporter {{ $labels.instance }}) has stalled on at least half of its nodes while work waited'),
          // Slow burn, ticket: halts spending the budget at its own rate over 3d and the last 6h: gone
          // by the period's end. `for: 3h`.
          {
            alert: 'LedgerBlockchainLivenessBudgetBurn',
          } + rule($._config, slo.blockchainLiveness($._config), 3, 'Blockchain {{ $labels.blockchain }} (exporter {{ $labels.instance }}) has stalled on at least half of its nodes while work waited'),
        ],
      },
    ],
  },
}
