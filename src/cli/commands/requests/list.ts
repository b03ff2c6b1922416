import { type Command, Option } from 'commander';
import { accessRequestStatuses } from '../../../store/vocabulary.js';
import { shortId } from '../../ids.js';
import { printJson, printRows, when } from '../../output.js';
import { enc, type RequestsCli, roleName, type Summary } from './shared.js';

/** How a terminal flags an app whose name svc does not vouch for, by how svc knows it. */
const UNVOUCHED: Record<string, string> = { dynamic: ' (registered itself)', metadata_document: ' (metadata document)' };

/** `svc requests list`: the requests you may see, one a row. */
export function registerList(requests: Command, { o, connect }: RequestsCli): void {
  requests
    .command('list')
    .description('Requests you may see: every draft, and those you decided')
    .addOption(new Option('--status <status>', 'only this status (pending is draft, as the review page and `svc review` say)').choices([...accessRequestStatuses, 'pending']))
    .option('--json', 'machine-readable output')
    .action(async (opts: { status?: string; json?: boolean }, cmd: Command) => {
      // Said here too, so that a daemon that predates the word answers the same.
      const status = opts.status === 'pending' ? 'draft' : opts.status;
      const q = status ? `?status=${enc(status)}` : '';
      const { body } = await (await connect(cmd)).request<{ data: Summary[] }>('GET', `/svc/v1/access-requests${q}`);
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        { header: 'id', value: (r) => (o.isTTY ? shortId(r.id) : r.id), copy: true },
        { header: 'status', value: (r) => r.status },
        // on a terminal, flag apps whose name svc does not vouch for (piped rows keep their shape)
        { header: 'app', value: (r) => `${r.app_name ?? r.app_client_id}${o.isTTY && r.app_registered === false ? (UNVOUCHED[r.client_kind ?? ''] ?? ' (unregistered)') : ''}` },
        // people read role names on a terminal; scripts get the wire values
        { header: 'requested', value: (r) => (o.isTTY ? roleName(r.requested_role) : r.requested_role) },
        { header: 'approved', value: (r) => (r.approved_role ? (o.isTTY ? roleName(r.approved_role) : r.approved_role) : '') },
        { header: 'mcp servers', value: (r) => r.requested.mcp_servers.length },
        { header: 'created', value: (r) => when(o, r.created_at) },
      ]);
    });
}
