import { AppError } from '../errors.js';

/**
 * The answers in flight that are streams with no end of their own (an MCP host keeps its GET
 * stream open all day), each with the way to end it. When svc stops, these end at once; every
 * other request keeps its grace to finish. Per app, in memory.
 */
export class OpenStreams {
  private readonly enders = new Set<() => void>();

  /** `max`: how many may be open at once (each holds two file descriptors); 0 is no cap. */
  constructor(private readonly max = 0) {}

  get size(): number {
    return this.enders.size;
  }

  /**
   * Holds `end` while the stream is open; call what this answers once the stream is over. Beyond
   * the cap the stream is refused at once (503 with Retry-After), never left waiting in silence.
   */
  hold(end: () => void): () => void {
    if (this.max > 0 && this.enders.size >= this.max) {
      throw new AppError('too_many_streams', `svc holds as many open streams as it may (${this.max}); try again shortly.`, { headers: { 'Retry-After': '5' } });
    }
    this.enders.add(end);
    return () => this.enders.delete(end);
  }

  /** Ends every open stream; answers how many there were. */
  endAll(): number {
    const all = [...this.enders];
    this.enders.clear();
    for (const end of all) end();
    return all.length;
  }
}
