// Ledger / SLOs: the burn-rate SLOs of lib/slo.libsonnet, from the records of slo.libsonnet
// (load rules.yml): each node's and chain's error budget left over the period, how fast it
// burns, and the objectives.
local g = import '../lib/grafana.libsonnet';
local r = import '../lib/replicas.libsonnet';
local slo = import '../lib/slo.libsonnet';

{
  grafanaDashboards+:: {
    'ledger-slo.json':
      local c = $._config;
      // A record folded over an HA pair's replicas (lib/replicas.libsonnet), should it carry
      // them: one per node or chain.
      local f(metric, s) = r.read(c, metric, s);
      local pick = 'job=~"$job", instance=~"$instance"';
      local L = '%s, %s' % [c.ledgerSelector, pick];
      local N = L + ', node=~"$node"';
      local C = L + ', blockchain=~"$blockchain"';
      local nodes = slo.nodeAvailability(c);
      local chains = slo.blockchainLiveness(c);
      local budget(s) = '(1 - %s)' % std.toString(s.objective);
      // The share of the period's budget not yet spent: 1 at the period's start, 0 spent.
      local left(s, sel) = '1 - %s / %s' % [f(slo.record(s, c.sloPeriod), sel), budget(s)];
      local burn(s, sel, window) = '%s / %s' % [f(slo.record(s, window), sel), budget(s)];
      local pages = slo.factor(slo.pairs[0], c.sloPeriod);
      local budgetSteps = g.thresholds('red', [[0, 'orange'], [0.25, 'green']]);
      local burnSteps = g.thresholds('green', [[1, 'orange'], [pages, 'red']]);
      local period = slo.durationText(c.sloPeriod);
      g.dashboard(
        c,
        'ledger-slo',
        'SLOs',
        'Burn-rate SLOs: node availability and blockchain liveness, the error budget left over the period and how fast it burns (the workbook alerts LedgerNodeAvailabilityBudgetBurn and LedgerBlockchainLivenessBudgetBurn). Needs the recording rules (rules.yml).',
        [
          g.queryVariable('job', 'Job', 'ledger_node_up{%s}' % c.ledgerSelector),
          g.queryVariable('instance', 'Instance', 'ledger_node_up{%s, job=~"$job"}' % c.ledgerSelector),
          g.queryVariable('node', 'Node', 'ledger_node_up{%s}' % L),
          g.queryVariable('blockchain', 'Blockchain', 'ledger_blockchain_up{%s}' % N),
        ],
        [
          g.row(1, 'Objectives'),
          g.stat(
            2,
            'Least node availability (objective %s)' % slo.percentText(nodes.objective),
            'The lowest share of the last %s any selected node answered /health (ledger_node_up); green at or above nodeAvailabilityObjective, %s. The budget is the rest: %s of the period.' % [period, slo.percentText(nodes.objective), slo.percentText(1 - nodes.objective)],
            [g.target('min(1 - %s)' % f(slo.record(nodes, c.sloPeriod), N), 'availability')],
            unit='percentunit',
            steps=g.thresholds('red', [[nodes.objective, 'green']]),
            size=[6, 4],
          ),
          g.stat(
            3,
            'Least chain liveness (objective %s)' % slo.percentText(chains.objective),
            "The lowest share of the last %s any selected chain advanced on a majority of its nodes or had nothing to do (LedgerBlockHeightStalled's condition on fewer than half of them); green at or above blockchainLivenessObjective, %s." % [period, slo.percentText(chains.objective)],
            [g.target('min(1 - %s)' % f(slo.record(chains, c.sloPeriod), C), 'liveness')],
            unit='percentunit',
            steps=g.thresholds('red', [[chains.objective, 'green']]),
            size=[6, 4],
          ),
          g.stat(
            4,
            'Least node budget left',
            'The smallest share of its %s error budget any selected node has left; below 0, the objective is missed.' % period,
            [g.target('min(%s)' % left(nodes, N), 'budget left')],
            unit='percentunit',
            steps=budgetSteps,
            size=[6, 4],
          ),
          g.stat(
            5,
            'Least chain budget left',
            'The smallest share of its %s error budget any selected chain has left; below 0, the objective is missed.' % period,
            [g.target('min(%s)' % left(chains, C), 'budget left')],
            unit='percentunit',
            steps=budgetSteps,
            size=[6, 4],
          ),
          g.row(6, 'Node availability'),
          g.table(
            7,
            'Node budget left',
            'Per node: availability over the last %s (1 - the error ratio) and the share of the error budget left.' % period,
            [
              g.tableTarget('1 - %s' % f(slo.record(nodes, c.sloPeriod), N)),
              g.tableTarget(left(nodes, N)),
            ],
            ['node', 'instance', 'Value #A', 'Value #B'],
            hide=['job'],
            renames={ 'Value #A': 'availability', 'Value #B': 'budget left' },
            merge=true,
            size=[8, 8],
          ),
          g.timeseries(
            8,
            'Node burn rate (1h)',
            'How fast each node spends its budget over the last hour: 1 spends it exactly over the %s; the page (with the 5m window) fires above %s.' % [period, std.toString(pages)],
            [g.target(burn(nodes, N, '1h'), '{{node}}')],
            size=[8, 8],
          ) { fieldConfig+: { defaults+: { thresholds: burnSteps, custom+: { thresholdsStyle: { mode: 'line' } } } } },
          g.timeseries(
            9,
            'Node burn rate (1d)',
            'The same over the last day: the ticket (with the 2h window) opens above %s.' % std.toString(slo.factor(slo.pairs[2], c.sloPeriod)),
            [g.target(burn(nodes, N, '1d'), '{{node}}')],
            size=[8, 8],
          ) { fieldConfig+: { defaults+: { thresholds: burnSteps, custom+: { thresholdsStyle: { mode: 'line' } } } } },
          g.row(10, 'Blockchain liveness'),
          g.table(
            11,
            'Chain budget left',
            'Per chain (and exporter): the share of the last %s it advanced on a majority of its nodes or had nothing to do, and the share of the error budget left.' % period,
            [
              g.tableTarget('1 - %s' % f(slo.record(chains, c.sloPeriod), C)),
              g.tableTarget(left(chains, C)),
            ],
            ['blockchain', 'instance', 'Value #A', 'Value #B'],
            hide=['job'],
            renames={ 'Value #A': 'liveness', 'Value #B': 'budget left' },
            merge=true,
            size=[8, 8],
          ),
          g.timeseries(
            12,
            'Chain burn rate (1h)',
            'How fast each chain spends its budget over the last hour: the page (with the 5m window) fires above %s.' % std.toString(pages),
            [g.target(burn(chains, C, '1h'), '{{blockchain}}')],
            size=[8, 8],
          ) { fieldConfig+: { defaults+: { thresholds: burnSteps, custom+: { thresholdsStyle: { mode: 'line' } } } } },
          g.timeseries(
            13,
            'Chain not advancing',
            'Per chain: 1 while it does not advance on a majority of its nodes with work waiting (the bad time the budget counts), 0 otherwise.',
            [g.target(f(slo.notAdvancingRecord, C), '{{blockchain}}')],
            size=[8, 8],
          ),
        ],
      ),
  },
}
