// The exporter itself: scraped, present, and running on the config it was given.
{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-exporter',
        rules: [
          // Prometheus could not scrape the exporter. 2m = 8 failed scrapes at the 15s
          // interval: rides out one exporter restart.
          {
            alert: 'LedgerExporterDown',
            expr: 'up{%(exporterSelector)s} == 0' % $._config,
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'The ledger exporter cannot be scraped.',
              description: |||
                Prometheus cannot scrape the ledger exporter {{ $labels.instance }} (job
                {{ $labels.job }}). The ledger nodes it polls are unmonitored and no other
                Ledger alert can fire for them.
              |||,
            },
          },
          // Prometheus has no target at all for the exporter's job (service discovery lost
          // it or the scrape config changed), so LedgerExporterDown cannot fire either.
          // Same 2m.
          {
            alert: 'LedgerExporterAbsent',
            expr: 'absent(up{%(exporterSelector)s})' % $._config,
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Prometheus has no ledger exporter target.',
              description: |||
                No target matching `%(exporterSelector)s` exists in Prometheus{{ if $labels.job }}
                (job {{ $labels.job }}){{ end }}: no ledger node is monitored. Check the scrape
                configuration and service discovery.
              ||| % $._config,
            },
          },
          // The exporter refused a changed config file and keeps polling with the old one.
          // 5m leaves time to fix a typo and reload again before anyone is told.
          {
            alert: 'LedgerExporterConfigReloadFailed',
            expr: 'ledger_exporter_config_last_reload_successful{%(exporterSelector)s} == 0' % $._config,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The ledger exporter failed to reload its configuration.',
              description: |||
                The last configuration reload of the ledger exporter {{ $labels.instance }}
                failed; it keeps using the previous configuration. Run
                `ledger-exporter --config.check` on the file to see what to fix.
              |||,
            },
          },
        ],
      },
    ],
  },
}
