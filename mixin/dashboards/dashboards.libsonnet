// grafanaDashboards: file name -> dashboard.
(import 'fleet.libsonnet') +
(import 'node.libsonnet') +
(import 'exporter.libsonnet') +
(import 'watch.libsonnet') +
(import 'slo.libsonnet')
