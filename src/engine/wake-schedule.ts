/** The longest delay setTimeout takes; a later wake-up is armed again when this one fires. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * A timer fires up to a millisecond before its time (libuv rounds), and a claim sent before an
 * execution's due time finds nothing and costs a round trip: wake-ups come this much later.
 */
const WAKE_MARGIN_MS = 2;

/** How many wake-ups a worker remembers; past that it forgets the latest, which its poll then finds. */
const DEFAULT_CAPACITY = 10_000;

/**
 * The instants (on this process's clock) at which executions this worker paused come due, and one
 * timer armed for the earliest of them. An instant announced earlier than the armed one re-arms it;
 * when it fires, every instant passed is dropped and the timer moves to the next. So a pause wakes
 * its worker at its time rather than at the next poll, and an idle worker with nothing paused arms
 * no timer at all.
 */
export class WakeSchedule {
  /** Ascending. */
  private readonly instants: number[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The instant the timer is armed for. */
  private armedFor = Infinity;
  private stopped = false;

  constructor(
    private readonly onDue: () => void,
    private readonly capacity = DEFAULT_CAPACITY,
  ) {}

  /** How many wake-ups are pending (for tests). */
  get size(): number {
    return this.instants.length;
  }

  /** Adds a wake-up at `at` (this process's clock). */
  add(at: number): void {
    if (this.stopped || !Number.isFinite(at)) return;
    const list = this.instants;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (list[mid] <= at) lo = mid + 1;
      else hi = mid;
    }
    // The same instant twice (a pause announced again) wakes once.
    if (lo > 0 && list[lo - 1] === at) return;
    list.splice(lo, 0, at);
    if (list.length > this.capacity) list.pop();
    if (list[0] < this.armedFor) this.arm();
  }

  /** Forgets every wake-up and disarms the timer; nothing is armed after. */
  stop(): void {
    this.stopped = true;
    this.instants.length = 0;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
  }

  private arm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
    if (this.instants.length === 0) return;
    const first = this.instants[0];
    this.armedFor = first;
    const delay = Math.min(LONGEST_TIMER_MS, Math.max(0, first - Date.now() + WAKE_MARGIN_MS));
    this.timer = setTimeout(() => this.fire(), delay);
  }

  private fire(): void {
    this.timer = undefined;
    const now = Date.now() - WAKE_MARGIN_MS;
    let due = 0;
    while (due < this.instants.length && this.instants[due] <= now) due += 1;
    this.instants.splice(0, due);
    this.arm();
    if (due > 0) this.onDue();
  }
}
