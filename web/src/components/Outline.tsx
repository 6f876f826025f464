/**
 * The right outline (docs/04 §4): headings of the current Markdown; a click scrolls the editor's
 * matching heading into view; the heading being read is highlighted while scrolling. Hidden on
 * narrow screens by CSS.
 *
 * Headings are matched to the editor's DOM by position (the n-th heading of the text is the
 * n-th h1-h6 the editor renders), so no ids have to be injected into the editor's content.
 */
import { useEffect, useState } from 'preact/hooks'
import { t } from '../lib/i18n'
import type { Heading } from '../lib/tree'

function headingElements(container: HTMLElement | null): HTMLElement[] {
  return container ? Array.from(container.querySelectorAll<HTMLElement>('.ProseMirror h1, .ProseMirror h2, .ProseMirror h3, .ProseMirror h4, .ProseMirror h5, .ProseMirror h6')) : []
}

export function Outline(props: { headings: Heading[]; container: () => HTMLElement | null; scroller: () => HTMLElement | null }) {
  const [active, setActive] = useState(-1)
  useEffect(() => {
    const sc = props.scroller()
    if (!sc) return
    const onScroll = () => {
      const box = sc.getBoundingClientRect()
      const els = headingElements(props.container())
      // at the very end the last headings can't reach the top: the lowest one on screen wins
      const atEnd = sc.scrollTop + sc.clientHeight >= sc.scrollHeight - 2 && sc.scrollTop > 0
      let idx = -1
      els.forEach((el, i) => {
        const top = el.getBoundingClientRect().top
        if (top - box.top <= 24 || (atEnd && top < box.bottom)) idx = i
      })
      setActive(idx)
    }
    sc.addEventListener('scroll', onScroll, { passive: true })
    onScroll()
    return () => sc.removeEventListener('scroll', onScroll)
  }, [props.headings.length])
  if (!props.headings.length) return <aside class="outline" aria-label={t('outline')} />
  const min = Math.min(...props.headings.map((h) => h.level))
  return (
    <aside class="outline" aria-label={t('outline')}>
      <h2 class="outline-title">{t('outline')}</h2>
      <ul>
        {props.headings.map((h, i) => (
          <li key={i} class={`lvl${h.level - min}${i === active ? ' active' : ''}`}>
            <button
              type="button"
              class="link-button"
              aria-current={i === active ? 'location' : undefined}
              onClick={() => {
                const el = headingElements(props.container())[i]
                if (el) {
                  el.scrollIntoView({ block: 'start' })
                  setActive(i)
                }
              }}
            >
              {h.text}
            </button>
          </li>
        ))}
      </ul>
    </aside>
  )
}
