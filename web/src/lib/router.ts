import { readable } from 'svelte/store';

export const BASE = '/app';

/** The address inside the app: path (with `/app`) and query. */
export interface Route {
  readonly path: string;
  readonly query: URLSearchParams;
}

const read = (): Route => ({ path: location.pathname, query: new URLSearchParams(location.search) });

let notify: ((route: Route) => void) | undefined;

/** The current route; changes on navigate() and on the browser's back and forward buttons. */
export const route = readable<Route>(read(), (set) => {
  notify = set;
  const onPop = () => set(read());
  addEventListener('popstate', onPop);
  return () => {
    removeEventListener('popstate', onPop);
    notify = undefined;
  };
});

export const currentAddress = () => location.pathname + location.search;

/** Client-side navigation to an address inside the app. */
export function navigate(address: string, { replace = false } = {}): void {
  if (address === currentAddress()) return;
  if (replace) history.replaceState(null, '', address);
  else history.pushState(null, '', address);
  notify?.(read());
  scrollTo(0, 0);
}

/**
 * Same-origin links into the app navigate without a page load; links elsewhere (a short link
 * opening in a new tab, the API docs) behave as usual.
 */
export function interceptLinks(root: HTMLElement): () => void {
  const onClick = (event: MouseEvent) => {
    if (
      event.defaultPrevented ||
      event.button !== 0 ||
      event.metaKey ||
      event.ctrlKey ||
      event.shiftKey ||
      event.altKey
    ) {
      return;
    }
    const anchor = (event.target as Element | null)?.closest('a');
    if (!anchor || anchor.target || anchor.hasAttribute('download') || anchor.origin !== location.origin) return;
    if (!anchor.pathname.startsWith(`${BASE}/`)) return;
    event.preventDefault();
    navigate(anchor.pathname + anchor.search);
  };
  root.addEventListener('click', onClick);
  return () => root.removeEventListener('click', onClick);
}
