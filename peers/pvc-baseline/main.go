// pvc-baseline: the peer cnsreplay's Kubernetes provider is measured against (kube-burner's
// Go module is filtered on this machine's module proxy, so this is the plain client-go
// baseline the issue allows). It creates COUNT PVCs open-loop at RATE per second (each at its
// own scheduled instant, whether or not earlier ones are bound), watches them through one
// shared informer, and reports create→Bound measured from the intended instant, like cnsreplay.
// Then it deletes every PVC it created (by name, after checking our label) and waits until
// they are gone. Client QPS/burst are set explicitly and reported.
//
//	pvc-baseline -kubeconfig K -namespace NS -storage-class SC -count N -rate R [-size 1Mi]
//
// Output: one JSON object on stdout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

type result struct {
	Tool          string      `json:"tool"`
	Count         int         `json:"count"`
	Rate          float64     `json:"intended_rate"`
	AchievedRate  float64     `json:"achieved_create_rate"`
	QPS           float32     `json:"client_qps"`
	Burst         int         `json:"client_burst"`
	CreateCall    percentiles `json:"create_call"` // intended instant -> the create's response
	CreateToBound percentiles `json:"create_to_bound"`
	// PVCs Bound per second, from the first intended create to the last Bound.
	BoundThroughput float64     `json:"bound_throughput"`
	Failed          int         `json:"failed"`
	DeleteToGone    percentiles `json:"delete_to_gone"`
	WallSeconds     float64     `json:"wall_seconds"`
}

func pct(ds []time.Duration) percentiles {
	if len(ds) == 0 {
		return percentiles{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(s) {
			i = len(s) - 1
		}
		return float64(s[i].Nanoseconds()) / 1e6
	}
	return percentiles{Count: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: at(1)}
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	ns := flag.String("namespace", "default", "namespace (must exist)")
	sc := flag.String("storage-class", "", "StorageClass of the PVCs")
	count := flag.Int("count", 100, "PVCs to create")
	rate := flag.Float64("rate", 10, "PVC creations per second")
	size := flag.String("size", "1Mi", "requested size")
	qps := flag.Float64("qps", 200, "client QPS")
	burst := flag.Int("burst", 400, "client burst")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up waiting after this long")
	flag.Parse()
	if err := run(*kubeconfig, *ns, *sc, *count, *rate, *size, float32(*qps), *burst, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "pvc-baseline:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, ns, sc string, count int, rate float64, size string, qps float32, burst int, timeout time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	qty, err := resource.ParseQuantity(size)
	if err != nil {
		return fmt.Errorf("-size: %w", err)
	}
	runID := fmt.Sprintf("%d", time.Now().UnixNano())
	label := "pvc-baseline/run"
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	var mu sync.Mutex
	intended := map[string]time.Time{}
	bound := map[string]time.Time{}
	deleted := map[string]time.Time{}
	gone := map[string]time.Time{}
	allBound := make(chan struct{})
	allGone := make(chan struct{})
	var boundOnce, goneOnce sync.Once

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = label + "=" + runID }))
	inf := factory.Core().V1().PersistentVolumeClaims().Informer()
	onPVC := func(obj interface{}) {
		p, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok || p.Status.Phase != corev1.ClaimBound {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, seen := bound[p.Name]; !seen {
			bound[p.Name] = now
			if len(bound) == count {
				boundOnce.Do(func() { close(allBound) })
			}
		}
	}
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPVC,
		UpdateFunc: func(_, n interface{}) { onPVC(n) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			p, ok := obj.(*corev1.PersistentVolumeClaim)
			if !ok {
				return
			}
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			gone[p.Name] = now
			if len(gone) == count {
				goneOnce.Do(func() { close(allGone) })
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("informer did not sync")
	}

	var wg sync.WaitGroup
	var calls []time.Duration
	failed := 0
	origin := time.Now()
	var lastCreate time.Time
	for i := 0; i < count; i++ {
		at := origin.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		time.Sleep(time.Until(at))
		name := fmt.Sprintf("baseline-%s-%d", runID, i)
		mu.Lock()
		intended[name] = at
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{label: runID}},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty}},
				},
			}
			if sc != "" {
				pvc.Spec.StorageClassName = &sc
			}
			t0 := time.Now()
			_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Since(at)) // intended instant -> response, as cnsreplay
			if err != nil {
				failed++
				fmt.Fprintln(os.Stderr, "create", name, err)
			}
			if t0.After(lastCreate) {
				lastCreate = t0
			}
		}()
	}
	wg.Wait()
	createSpan := lastCreate.Sub(origin).Seconds()
	if failed == 0 {
		select {
		case <-allBound:
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "timed out waiting for Bound")
		}
	}

	// Delete exactly what we created (names we recorded, label checked by the selector).
	mu.Lock()
	names := make([]string, 0, len(intended))
	for n := range intended {
		names = append(names, n)
	}
	mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		t := time.Now()
		err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintln(os.Stderr, "delete", n, err)
		}
		mu.Lock()
		deleted[n] = t
		mu.Unlock()
	}
	select {
	case <-allGone:
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "timed out waiting for deletion")
	}

	mu.Lock()
	defer mu.Unlock()
	var toBound, toGone []time.Duration
	for n, at := range intended {
		if b, ok := bound[n]; ok {
			toBound = append(toBound, b.Sub(at))
		}
		if g, ok := gone[n]; ok {
			toGone = append(toGone, g.Sub(deleted[n]))
		}
	}
	var lastBound time.Time
	for _, b := range bound {
		if b.After(lastBound) {
			lastBound = b
		}
	}
	throughput := 0.0
	if span := lastBound.Sub(origin).Seconds(); len(bound) > 0 && span > 0 {
		throughput = float64(len(bound)) / span
	}
	achieved := 0.0
	if createSpan > 0 {
		achieved = float64(count-1) / createSpan
	}
	res := result{
		Tool: "pvc-baseline (client-go)", Count: count, Rate: rate, AchievedRate: achieved,
		QPS: qps, Burst: burst, CreateCall: pct(calls), CreateToBound: pct(toBound),
		BoundThroughput: throughput,
		Failed:          failed + (count - len(toBound)), DeleteToGone: pct(toGone),
		WallSeconds: time.Since(origin).Seconds(),
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
