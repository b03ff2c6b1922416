// oidc-provider ships no type declarations; svc uses a small, loosely typed surface of it.
declare module 'oidc-provider' {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  type Loose = any;
  export class Provider {
    constructor(issuer: string, configuration: Record<string, Loose>);
    /** deprecated in oidc-provider 9: the Provider is itself the Koa app */
    app: Loose;
    middleware: Loose[];
    callback(): (req: Loose, res: Loose) => void;
    Grant: Loose;
    AccessToken: Loose;
    ResourceServer: Loose;
    on(event: string, listener: (...args: Loose[]) => void): this;
    registerGrantType(name: string, handler: (ctx: Loose) => Promise<void>, params?: string[], dupes?: string[]): void;
    interactionDetails(req: Loose, res: Loose): Promise<Loose>;
    interactionResult(req: Loose, res: Loose, result: Record<string, unknown>, opts?: { mergeWithLastSubmission?: boolean }): Promise<string>;
  }
  export const interactionPolicy: Loose;
  export const errors: Loose;
  export default Provider;
}

declare module 'oidc-provider/lib/helpers/als.js' {
  import type { AsyncLocalStorage } from 'node:async_hooks';
  const storage: AsyncLocalStorage<unknown>;
  export default storage;
}
