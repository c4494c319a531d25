(import 'mixin.libsonnet').grafanaDashboards
