"""Facts, entities and the predicate vocabulary (docs/facts.md): what a person's knowledge says
about them and the people, organisations and places they know, shared by every app the user
trusts (through ``openkb.apps`` grants) and always under the user's control.
"""
