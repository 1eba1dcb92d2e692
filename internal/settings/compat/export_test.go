package compat

// Ours returns every RLS_ variable that a row of the table names, for the
// tests that hold them to the settings.
func Ours() []string {
	var ours []string
	for _, v := range table {
		ours = append(ours, v.ours...)
	}
	return ours
}
