import { Box } from 'ink';
import { Header } from './components/Header.js';
import { KeyHints } from './components/KeyHints.js';
import { RequestDetail } from './components/RequestDetail.js';
import { RequestList } from './components/RequestList.js';
import { AppsView } from './components/AppsView.js';
import { StatusLine } from './components/StatusLine.js';
import { safe } from './format.js';
import { detailSecondsLeft, useUIState } from './state.js';

export interface AppProps {
  width: number;
  height: number;
  color: boolean;
  /** Who is reviewing, shown top right. */
  user?: string;
}

/** Header, then the list or the detail, then the status line and the keys. Reads state; never acts. */
export function App({ width, height, color, user }: AppProps) {
  const s = useUIState();
  // Header (2) + status (2) + keys (1), and one line spare so Ink never scrolls an 80x24 terminal.
  const body = Math.max(3, height - 6);
  const who = user ? safe(user, 40) : '';
  const d = s.screen === 'detail' ? s.detail : null;
  const apps = s.view === 'apps';
  const title = apps
    ? 'svc review: apps you let in'
    : d
      ? `svc review › ${d.data ? safe(d.data.app_name ?? d.data.app_client_id, 60) : 'loading'}`
      : // `pending` is what people say; `draft` is the status the CLI and API show: named once, here
      'svc review: pending (draft) access requests';
  const aside = apps ? [`${s.apps.grants.length} active`, who].filter(Boolean).join(' · ') : d ? who : [`${s.requests.length} pending`, who].filter(Boolean).join(' · ');
  return (
    <Box flexDirection="column" width={width}>
      <Header title={title} aside={aside} width={width} color={color} />
      <Box flexDirection="column" height={body} overflow="hidden">
        {apps ? (
          <AppsView apps={s.apps} width={width} height={body} color={color} />
        ) : d ? (
          <RequestDetail
            data={d.data}
            role={d.role}
            selected={d.selected}
            cursor={d.cursor}
            secondsLeft={detailSecondsLeft(d, s.now)}
            width={width}
            height={body}
            color={color}
          />
        ) : (
          <RequestList requests={s.requests} cursor={s.cursor} loaded={s.loaded} now={s.now} width={width} height={body} color={color} />
        )}
      </Box>
      <Box height={2} overflow="hidden" width={width}>
        <StatusLine notice={s.notice} pollError={s.pollError} busy={s.busy} color={color} />
      </Box>
      <KeyHints
        screen={apps ? (s.apps.edit ? 'limits' : s.apps.confirmRevoke ? 'confirm' : 'apps') : s.screen}
        color={color}
        decidable={s.detail?.data?.status === 'draft' && detailSecondsLeft(s.detail, s.now) > 0}
      />
    </Box>
  );
}
