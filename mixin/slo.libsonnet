// The SLOs' recording rules (lib/slo.libsonnet has the math and the names): for node
// availability and blockchain liveness, the error ratio over each window the burn-rate
// alerts compare (5m to 3d) and over the period (sloPeriod, 30d) the dashboard's "budget
// left" reads. The alerts LedgerNodeAvailabilityBudgetBurn and
// LedgerBlockchainLivenessBudgetBurn read these records: load rules.yml with alerts.yml.
local slo = import 'lib/slo.libsonnet';

{
  prometheusRules+:: {
    groups+: [
      {
        name: 'ledger-slo-node-availability.rules',
        rules: slo.recordingRules($._config, slo.nodeAvailability($._config)),
      },
      {
        name: 'ledger-slo-blockchain-liveness.rules',
        // the indicator first: the ratios after it read this evaluation's sample
        rules: [{ record: slo.notAdvancingRecord, expr: slo.notAdvancing($._config) }]
               + slo.recordingRules($._config, slo.blockchainLiveness($._config)),
      },
    ],
  },
}
