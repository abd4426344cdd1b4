/**
 * Executions created, completed and failed per minute over the last hour (GET /stats/throughput), as
 * plain SVG bars: for every task on the executions page, for one on its card. Screen readers get the
 * chart's title and a summary, a bar's tooltip its minute and count, and anyone can open it as a table.
 */
import { useId } from 'preact/hooks';
import type { Throughput } from '../client';
import { useApi, useAuthPrompt } from './api-context';
import { ApiErrorBox, useFormatInstant } from './components';
import { buildThroughputChart, SERIES } from './throughput';
import { usePolling } from './use-polling';

/** The chart's box in SVG units; it is stretched to the card's width. */
const WIDTH = 600;
const HEIGHT = 100;

function Summary({ data, totals }: { data: Throughput; totals: string }) {
  const formatInstant = useFormatInstant();
  const active = data.buckets.filter((b) => b.created + b.completed + b.failed > 0);
  if (active.length === 0) return <p class="muted small">No execution was created, completed or failed in the last hour.</p>;
  return (
    <div class="table-scroll">
      <table class="throughput-table" data-testid="throughput-table">
        <caption class="muted small">{totals}; minutes without any are left out.</caption>
        <thead>
          <tr>
            <th>Minute from</th>
            {SERIES.map((s) => (
              <th key={s.key} class="num">
                {s.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {active.map((b) => (
            <tr key={b.start}>
              <td>{formatInstant(b.start)}</td>
              {SERIES.map((s) => (
                <td key={s.key} class="num">
                  {b[s.key]}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** `task` narrows it to one task; `compact` draws it smaller (a task's card). */
export function ThroughputChart({ task, compact = false }: { task?: string; compact?: boolean }) {
  const { client, autoRefresh } = useApi();
  const id = useId();
  const formatInstant = useFormatInstant();
  const polled = usePolling<Throughput>(() => client.throughput(task === undefined ? {} : { task }), [client, task], {
    intervalMs: compact ? 60_000 : 30_000,
    enabled: autoRefresh,
  });
  useAuthPrompt(polled.error);
  const title = `Executions per minute, last hour${task !== undefined && !compact ? `, task ${task}` : ''}`;
  if (!polled.data) {
    return (
      <figure class={`throughput${compact ? ' compact' : ''}`} data-testid="throughput-chart" data-loaded="false">
        <figcaption class="tp-caption">{title}</figcaption>
        {polled.error ? <ApiErrorBox error={polled.error} testId="throughput-error" /> : <p class="muted small">Loading…</p>}
      </figure>
    );
  }
  const data = polled.data;
  const chart = buildThroughputChart(data.buckets, WIDTH, HEIGHT);
  const totals = chart.series.map((s) => `${s.total} ${s.label.toLowerCase()}`).join(', ');
  const busiest = chart.busiest ? `; the busiest minute began ${formatInstant(chart.busiest.start)}` : '';
  return (
    <figure class={`throughput${compact ? ' compact' : ''}`} data-testid="throughput-chart" data-loaded="true">
      <figcaption class="tp-caption">
        <span class="tp-title">{title}</span>
        <span class="tp-legend">
          {chart.series.map((s) => (
            <span key={s.key} class={`tp-key tp-${s.key}`} data-testid={`throughput-total-${s.key}`} data-total={s.total}>
              {s.label} {s.total}
            </span>
          ))}
        </span>
      </figcaption>
      <div class="tp-plot">
        <span class="tp-ymax num" title="Executions per minute at the top of the chart">
          {chart.yMax}
        </span>
        <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="none" role="img" aria-labelledby={`${id}-t ${id}-d`} data-testid="throughput-svg">
          <title id={`${id}-t`}>{title}</title>
          <desc id={`${id}-d`}>{`In the last hour: ${totals}${busiest}.`}</desc>
          <line class="tp-grid" x1="0" x2={WIDTH} y1={HEIGHT / 2} y2={HEIGHT / 2} />
          {chart.series.map((s) => (
            <g key={s.key} class={`tp-bars tp-${s.key}`} data-series={s.key}>
              {s.bars.map((b) => (
                <rect key={b.start} x={b.x} y={b.y} width={b.width} height={b.height}>
                  <title>{`${formatInstant(b.start)}: ${b.value} ${s.label.toLowerCase()}`}</title>
                </rect>
              ))}
            </g>
          ))}
        </svg>
        <span class="tp-axis" aria-hidden="true">
          <span>60 min ago</span>
          <span>now</span>
        </span>
      </div>
      <details class="tp-details">
        <summary>As a table</summary>
        <Summary data={data} totals={`In the last hour: ${totals}`} />
      </details>
    </figure>
  );
}
