import { createInterface } from 'node:readline';
import { usage } from './client.js';

export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A secret from stdin (`--*-stdin`): the whole input, less one trailing newline. */
export async function secretFromStdin(read: () => Promise<string> = readStdin): Promise<string> {
  return (await read()).replace(/\r?\n$/, '');
}

/** Asks on the terminal without echo; refuses when there is no terminal to ask on. */
export async function promptHidden(question: string, flagHint: string): Promise<string> {
  if (!process.stdin.isTTY) throw usage(`No terminal to ask for it on; pass ${flagHint}.`);
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  const mutable = rl as unknown as { _writeToOutput: (s: string) => void };
  let asked = false;
  mutable._writeToOutput = (s: string) => {
    if (!asked) process.stderr.write(s);
  };
  return new Promise((resolve) => {
    rl.question(question, (answer) => {
      rl.close();
      process.stderr.write('\n');
      resolve(answer);
    });
    asked = true;
  });
}

export async function readSecret(useStdin: boolean | undefined, question: string, flagHint: string, read?: () => Promise<string>): Promise<string> {
  return useStdin ? secretFromStdin(read) : promptHidden(question, flagHint);
}
