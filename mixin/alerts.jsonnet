std.manifestYamlDoc((import 'mixin.libsonnet').prometheusAlerts)
