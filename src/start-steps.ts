import type { Logger } from './log.js';

/** How one started step is undone. */
export type Undo<T> = (value: T) => Promise<unknown> | unknown;

/**
 * A start made of named steps. Each step is run with how to undo it, and stopping undoes every
 * step that finished, in exactly the reverse of the order they were run: what the start began
 * last stops first. A step that must be undone later than its place in the start would give
 * (a file removed only once nothing answers any more) is run earlier, as a handle that the later
 * step uses, so the order is always read from where steps are run, never rearranged after.
 *
 * The same stop serves a finished start's shutdown and the unwind of one that did not finish.
 * Before each step the start is checked for having been called off (`checkpoint` throws).
 */
export class StartSteps {
  private readonly done: { name: string; undo: () => Promise<unknown> | unknown }[] = [];

  constructor(
    private readonly logger: Logger,
    private readonly checkpoint: () => void = () => undefined,
  ) {}

  /**
   * Runs the step `name` and answers its value. `undo`, when given, is recorded once the step has
   * finished; a step that throws records nothing, so it undoes its own part before throwing.
   */
  async run<T>(name: string, start: () => Promise<T> | T, undo?: Undo<T>): Promise<T> {
    this.checkpoint();
    this.logger.debug({ step: name }, 'start step');
    const value = await start();
    if (undo) this.done.push({ name, undo: () => undo(value) });
    return value;
  }

  /** The steps that are still to be undone, in the order they were run. */
  names(): string[] {
    return this.done.map((s) => s.name);
  }

  /**
   * Undoes every finished step, last first. A step whose undo fails is logged with its name and
   * the rest still run. Each step is undone once: a second stop finds nothing left to do.
   */
  async stop(): Promise<void> {
    for (const step of this.done.splice(0).reverse()) {
      try {
        this.logger.debug({ step: step.name }, 'stop step');
        await step.undo();
      } catch (err) {
        this.logger.warn({ step: step.name, err: (err as Error)?.message ?? String(err) }, 'shutdown step failed');
      }
    }
  }
}
