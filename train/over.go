package train

// Over returns in with every field over sets (a non-empty one) in place of
// in's: a command's flags over a config's keys.
func (in Inputs) Over(over Inputs) Inputs {
	for _, f := range []struct{ dst, src *string }{
		{&in.Model, &over.Model}, {&in.Tasks, &over.Tasks}, {&in.Fixtures, &over.Fixtures}, {&in.DSN, &over.DSN},
		{(*string)(&in.Engine), (*string)(&over.Engine)}, {(*string)(&in.SamplingEngine), (*string)(&over.SamplingEngine)},
	} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	return in
}
