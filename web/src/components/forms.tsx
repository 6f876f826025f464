/**
 * Form pieces the settings, account and admin pages share (docs/web.md). `Choice` is the one
 * `<select>` over a fixed list of values whose labels come from the message table: a role, a
 * visibility, a status filter. It keeps the value typed as the list's union, so a page never
 * casts `e.target.value` itself.
 */
import type { JSX } from 'preact'

export function Choice<V extends string>(props: {
  options: readonly V[]
  value: V
  onChange: (v: V) => void
  /** the visible text of an option (from the message table) */
  label: (v: V) => string
  id?: string
  /** for a select without a visible `<label for>` */
  ariaLabel?: string
  required?: boolean
}): JSX.Element {
  return (
    <select
      id={props.id}
      aria-label={props.ariaLabel}
      required={props.required}
      value={props.value}
      onChange={(e) => props.onChange((e.target as HTMLSelectElement).value as V)}
    >
      {props.options.map((v) => (
        <option key={v} value={v}>
          {props.label(v)}
        </option>
      ))}
    </select>
  )
}
