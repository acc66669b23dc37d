/**
 * Whether traces are to be exported: only when an OTLP endpoint is named (or the OTLP exporter
 * asked for by name), and neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` says
 * otherwise. Read before anything of OpenTelemetry is loaded: off, none of it is.
 */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  // An empty value is an unset one, as the OpenTelemetry specification has it.
  const setting = (name: string) => env[name]?.trim().toLowerCase() ?? '';
  if (setting('OTEL_SDK_DISABLED') === 'true') return false;
  const exporters = setting('OTEL_TRACES_EXPORTER');
  if (exporters !== '') return exporters.split(',').some((name) => name.trim() === 'otlp');
  return setting('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== '' || setting('OTEL_EXPORTER_OTLP_ENDPOINT') !== '';
}
