/**
 * The answers in flight that are streams with no end of their own (an MCP host keeps its GET
 * stream open all day), each with the way to end it. When svc stops, these end at once; every
 * other request keeps its grace to finish. Per app, in memory.
 */
export class OpenStreams {
  private readonly enders = new Set<() => void>();

  /** Holds `end` while the stream is open; call what this answers once the stream is over. */
  hold(end: () => void): () => void {
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
