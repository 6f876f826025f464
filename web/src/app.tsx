import { useEffect, useRef } from 'preact/hooks'

export function App() {
  const ref = useRef<HTMLDivElement>(null)
  useEffect(() => {
    void import('./editor/Editor').then(({ mountEditor }) => mountEditor(ref.current!, { markdown: '# OpenKB' }))
  }, [])
  return <main><div ref={ref} /></main>
}
