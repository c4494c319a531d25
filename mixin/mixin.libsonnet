// ledger-exporter's monitoring mixin: prometheusAlerts, prometheusRules and
// grafanaDashboards (file name -> dashboard), configured by _config (config.libsonnet), the
// thresholds the exporter's status page applies (status_page.libsonnet) and the Alertmanager
// configuration that routes and inhibits the alerts (alertmanager.libsonnet).
(import 'config.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'dashboards/dashboards.libsonnet') +
(import 'status_page.libsonnet') +
(import 'alertmanager.libsonnet')
