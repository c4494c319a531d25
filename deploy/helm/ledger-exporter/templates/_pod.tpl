{{/*
The pod template of the exporter, the same in both workloads: the StatefulSet of daemon mode
(statefulset.yaml) and the Deployment of probe mode (deployment.yaml). Indented to sit under
their `template:`.
*/}}
{{- define "ledger-exporter.podTemplate" }}
{{- $fullname := include "ledger-exporter.fullname" . }}
{{- $scheme := include "ledger-exporter.scheme" . | upper }}
    metadata:
      {{- /* the exporter follows its mounted files live (--config.auto-reload-interval):
             a changed config rolls the pods only when rolloutOnConfigChange asks for it */}}
      {{- $annotations := dict }}
      {{- if and .Values.rolloutOnConfigChange (not .Values.existingConfigMap) }}
      {{- $_ := set $annotations "checksum/config" (include (print $.Template.BasePath "/configmap.yaml") . | sha256sum) }}
      {{- end }}
      {{- if and .Values.rolloutOnConfigChange .Values.webConfig.enabled }}
      {{- $_ := set $annotations "checksum/web-config" (include (print $.Template.BasePath "/secret-web-config.yaml") . | sha256sum) }}
      {{- end }}
      {{- with merge $annotations .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      labels:
        {{- include "ledger-exporter.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "ledger-exporter.serviceAccountName" . | quote }}
      automountServiceAccountToken: {{ .Values.automountServiceAccountToken }}
      enableServiceLinks: false
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . | quote }}
      {{- end }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml .Values.podSecurityContext | nindent 8 }}
      containers:
        - name: ledger-exporter
          image: {{ include "ledger-exporter.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy | quote }}
          args:
            - --config.file=/etc/ledger-exporter/config/config.yml
            - --state.file={{ include "ledger-exporter.stateFile" . }}
            - --web.listen-address=:{{ .Values.service.port }}
            - --log.format=json
            {{- if .Values.webConfig.enabled }}
            - --web.config.file=/etc/ledger-exporter/web/web-config.yml
            {{- end }}
            {{- range .Values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          {{- if or (include "ledger-exporter.statePerPod" .) .Values.extraEnv }}
          env:
            {{- if include "ledger-exporter.statePerPod" . }}
            # the pod's name, in its state file's (one claim shared by every replica)
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- end }}
            {{- with .Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- end }}
          ports:
            - name: metrics
              containerPort: {{ .Values.service.port }}
              protocol: TCP
          livenessProbe:
            {{- if .Values.livenessProbe }}
            {{- toYaml .Values.livenessProbe | nindent 12 }}
            {{- else }}
            {{- if include "ledger-exporter.basicAuth" . }}
            tcpSocket:
              port: metrics
            {{- else }}
            httpGet:
              path: /-/healthy
              port: metrics
              scheme: {{ $scheme }}
            {{- end }}
            periodSeconds: 20
            timeoutSeconds: 5
            failureThreshold: 3
            {{- end }}
          readinessProbe:
            {{- if .Values.readinessProbe }}
            {{- toYaml .Values.readinessProbe | nindent 12 }}
            {{- else }}
            {{- if include "ledger-exporter.basicAuth" . }}
            tcpSocket:
              port: metrics
            {{- else }}
            httpGet:
              path: /-/ready
              port: metrics
              scheme: {{ $scheme }}
            {{- end }}
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 3
            {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          securityContext:
            {{- toYaml .Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: config
              mountPath: /etc/ledger-exporter/config
              readOnly: true
            {{- if .Values.nodeFiles }}
            - name: nodes
              mountPath: /etc/ledger-exporter/nodes
              readOnly: true
            {{- end }}
            {{- if .Values.existingSecret }}
            - name: secrets
              mountPath: /etc/ledger-exporter/secrets
              readOnly: true
            {{- end }}
            {{- if .Values.webConfig.enabled }}
            - name: web-config
              mountPath: /etc/ledger-exporter/web
              readOnly: true
            {{- end }}
            {{- if .Values.webConfig.tlsSecretName }}
            - name: tls
              mountPath: /etc/ledger-exporter/tls
              readOnly: true
            {{- end }}
            - name: tmp
              mountPath: /tmp
            - name: state
              mountPath: /var/lib/ledger-exporter
            {{- range .Values.extraSecretMounts }}
            - name: {{ .name }}
              mountPath: {{ .mountPath }}
              readOnly: {{ if hasKey . "readOnly" }}{{ .readOnly }}{{ else }}true{{ end }}
            {{- end }}
            {{- with .Values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ include "ledger-exporter.configMapName" . }}
            items:
              - key: config.yml
                path: config.yml
        {{- if .Values.nodeFiles }}
        # the node lists, a folder the kubelet keeps in sync: followed live (node_files)
        - name: nodes
          configMap:
            name: {{ $fullname }}-nodes
        {{- end }}
        {{- if .Values.existingSecret }}
        - name: secrets
          secret:
            secretName: {{ .Values.existingSecret }}
            defaultMode: 0440
        {{- end }}
        {{- if .Values.webConfig.enabled }}
        - name: web-config
          secret:
            secretName: {{ $fullname }}-web-config
            defaultMode: 0440
        {{- end }}
        {{- if .Values.webConfig.tlsSecretName }}
        - name: tls
          secret:
            secretName: {{ .Values.webConfig.tlsSecretName }}
            defaultMode: 0440
        {{- end }}
        # Writable scratch space despite the read-only root filesystem.
        - name: tmp
          emptyDir:
            medium: Memory
            sizeLimit: 16Mi
        {{- if not (include "ledger-exporter.claimPerPod" .) }}
        # The state file: see persistence in values.yaml (with a claim per pod, the
        # StatefulSet's volumeClaimTemplates make this volume).
        - name: state
          {{- if .Values.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ default (printf "%s-state" $fullname) .Values.persistence.existingClaim | quote }}
          {{- else }}
          emptyDir:
            sizeLimit: 64Mi
          {{- end }}
        {{- end }}
        {{- range .Values.extraSecretMounts }}
        - name: {{ .name }}
          secret:
            secretName: {{ .secretName }}
            defaultMode: {{ .defaultMode | default 0440 }}
            {{- with .items }}
            items:
              {{- toYaml . | nindent 14 }}
            {{- end }}
        {{- end }}
        {{- with .Values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with include "ledger-exporter.topologySpread" . | trim }}
      topologySpreadConstraints:
        {{- . | nindent 8 }}
      {{- end }}
{{- end }}
